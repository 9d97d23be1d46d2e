from __future__ import annotations

from django.contrib import admin

from apps.decisions.models import Decision


@admin.register(Decision)
class DecisionAdmin(admin.ModelAdmin):
    list_display = ("job", "confirm_fault", "state", "strategy", "decided_by", "created_at", "outcome")
    list_filter = ("state", "strategy")
    raw_id_fields = ("job", "answered_by")

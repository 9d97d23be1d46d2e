from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from apps.policies.models import PolicyRevision, Preset


@admin.register(Preset)
class PresetAdmin(admin.ModelAdmin):
    list_display = ("name", "description", "builtin", "updated_at")
    search_fields = ("name", "description")


@admin.register(PolicyRevision)
class PolicyRevisionAdmin(admin.ModelAdmin):
    list_display = ("job", "number", "source", "author_name", "created_at", "comment")
    list_filter = ("source",)
    search_fields = ("job__name", "comment", "author_name")
    raw_id_fields = ("job", "author", "source_preset")

    # Revisions are immutable: new ones come from the form, the API or a restore.
    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

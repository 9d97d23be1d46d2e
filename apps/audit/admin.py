from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from apps.audit.models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ("created_at", "actor_name", "token_name", "action", "object_type", "object_repr")
    list_filter = ("action", "object_type")
    search_fields = ("actor_name", "object_repr", "request_id")
    date_hierarchy = "created_at"

    # The trail is append-only, for operators too.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

from __future__ import annotations

from django.contrib import admin

from apps.accounts.models import ApiToken, NamespaceGrant
from apps.audit.admin_hooks import AuditedAdmin


@admin.register(ApiToken)
class ApiTokenAdmin(AuditedAdmin):
    """Tokens are issued by ``issue_token`` or the API (the key is shown once); the admin can only revoke."""

    list_display = ("name", "user", "prefix", "created_at", "last_used_at", "expires_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("name", "prefix", "user__username")
    readonly_fields = ("name", "user", "prefix", "key_hash", "created_at", "last_used_at")
    fields = ("name", "user", "prefix", "key_hash", "created_at", "last_used_at", "expires_at", "revoked_at")

    audit_secret_fields = frozenset({"key_hash"})

    def has_add_permission(self, request: object) -> bool:
        return False


@admin.register(NamespaceGrant)
class NamespaceGrantAdmin(AuditedAdmin):
    list_display = ("role", "user", "group", "cluster", "namespace", "created_at")
    list_filter = ("role", "cluster")
    search_fields = ("namespace", "user__username", "group__name")

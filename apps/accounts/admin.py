from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.db import models
from django.http import HttpRequest, HttpResponse

from apps.accounts.models import ApiToken, NamespaceGrant, OidcIdentity
from apps.accounts.services import token_revoke_descendants
from apps.audit.actors import Actor
from apps.audit.admin_hooks import AuditedAdmin
from apps.core.middleware import request_id_of


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

    def save_model(self, request: HttpRequest, obj: models.Model, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if isinstance(obj, ApiToken) and obj.revoked_at is not None:  # the tokens it minted go with it
            user = request.user if request.user.is_authenticated else None
            token_revoke_descendants(obj, actor=Actor(user=user, request_id=request_id_of(request)))


@admin.register(NamespaceGrant)
class NamespaceGrantAdmin(AuditedAdmin):
    list_display = ("role", "user", "group", "cluster", "namespace", "from_oidc", "created_at")
    list_filter = ("role", "cluster", "from_oidc")
    # Set by OIDC sign-in only: a hand-made grant marked so would be revoked at the next sign-in.
    readonly_fields = ("from_oidc",)
    search_fields = ("namespace", "user__username", "group__name")


# Users and groups decide who holds which role (a group's grants reach its members), so their admin
# changes are audited like the grants' (issue #24): Django's own admins with the audit mixin.
admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class AuditedUserAdmin(AuditedAdmin, UserAdmin):
    audit_secret_fields = frozenset({"password"})

    def user_change_password(self, request: HttpRequest, id: str, form_url: str = "") -> HttpResponse:
        """The admin's password form saves without ``save_model``: audited here, without the password."""
        response = super().user_change_password(request, id, form_url)
        changed = request.method == "POST" and response.status_code == 302
        user = self.get_object(request, unquote(id)) if changed else None
        if user is not None:
            self._audit(request, "password_change", user, None, {"password": "(changed)"})
        return response


@admin.register(Group)
class AuditedGroupAdmin(AuditedAdmin, GroupAdmin):
    pass


@admin.register(OidcIdentity)
class OidcIdentityAdmin(AuditedAdmin):
    """Which provider account signs in as which user; deleting one unlinks it (the next sign-in of
    that account makes a new user)."""

    list_display = ("user", "issuer", "subject", "last_login_at")
    search_fields = ("user__username", "subject")
    readonly_fields = ("user", "issuer", "subject", "groups", "created_at", "last_login_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

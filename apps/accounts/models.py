"""API tokens (hashed at rest) and per-namespace role grants for users and groups."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q
from django.utils import timezone

from apps.core.model_parts import optional_cluster

ALL_NAMESPACES = "*"


class Role(models.TextChoices):
    """What a grant allows; each role includes the ones below it (admin ⊃ editor ⊃ viewer)."""

    VIEWER = "viewer"
    EDITOR = "editor"
    ADMIN = "admin"


# Rank of each role, so "at least editor" is a number comparison in Python and SQL alike.
ROLE_RANK: dict[str, int] = {Role.VIEWER: 1, Role.EDITOR: 2, Role.ADMIN: 3}


class ApiToken(models.Model):
    """A named API key for programs. Only the SHA-256 of the key is stored; the key is shown once."""

    name = models.CharField(max_length=100)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    prefix = models.CharField(max_length=8, help_text="First 8 characters of the key, to recognise it in UIs")
    key_hash = models.CharField(max_length=64, unique=True, help_text="SHA-256 hex digest of the key")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # The token that authenticated the request which minted this one (None: minted by a signed-in
    # user or a command). Revoking a token revokes its descendants; a deleted token takes them along.
    parent = models.ForeignKey(
        "self", on_delete=models.CASCADE, null=True, blank=True, related_name="children", editable=False
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "revoked_at"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and not self.is_expired


class NamespaceGrant(models.Model):
    """A role for a user or a group on one namespace ("*" = all) of one cluster (null = every cluster)."""

    role = models.CharField(max_length=8, choices=Role.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="grants"
    )
    group = models.ForeignKey(Group, on_delete=models.CASCADE, null=True, blank=True, related_name="grants")
    cluster = optional_cluster(related_name="grants")
    namespace = models.CharField(max_length=63, default=ALL_NAMESPACES, help_text='"*" = every namespace')
    # Set on the grants OIDC sign-in made from the provider's groups (OIDC_GROUP_ROLES): those, and only
    # those, are granted and revoked at each sign-in to match the groups. Grants made by hand stay.
    from_oidc = models.BooleanField(default=False, help_text="Granted from the identity provider's groups")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            # Exactly one grantee: a grant to nobody (or to both) is a bug waiting to happen.
            models.CheckConstraint(
                condition=(Q(user__isnull=False) & Q(group__isnull=True))
                | (Q(user__isnull=True) & Q(group__isnull=False)),
                name="grant_user_xor_group",
            ),
            models.CheckConstraint(condition=Q(role__in=[r.value for r in Role]), name="grant_role_known"),
        ]
        indexes = [models.Index(fields=["namespace"])]

    def __str__(self) -> str:
        who = f"user:{self.user_id}" if self.user_id else f"group:{self.group_id}"
        where = f"{self.cluster_id or '*'}/{self.namespace}"
        return f"{who} {self.role} on {where}"


class OidcIdentity(models.Model):
    """The provider account (issuer, subject) a local user signs in as through OIDC.

    Users are matched by this pair, never by e-mail or username: a provider account whose e-mail
    equals a local (break-glass) administrator's must not become that administrator.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    groups = models.JSONField(default=list, blank=True, help_text="The groups claim at the last sign-in")
    created_at = models.DateTimeField(auto_now_add=True)
    last_login_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="uniq_oidc_identity")]
        verbose_name_plural = "OIDC identities"

    def __str__(self) -> str:
        return f"{self.subject} @ {self.issuer}"

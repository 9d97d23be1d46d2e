from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings


class AccountsConfig(AppConfig):
    """API tokens and per-namespace role grants."""

    name = "apps.accounts"
    label = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from apps.accounts import schema  # noqa: F401  (registers the OpenAPI auth extension)
        from apps.accounts.oidc.group_roles import parse_group_roles

        # A wrong role mapping fails every process at start, naming the entry, not a sign-in later.
        parse_group_roles(settings.OIDC_GROUP_ROLES)

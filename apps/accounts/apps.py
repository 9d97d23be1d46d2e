from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """API tokens and per-namespace role grants."""

    name = "apps.accounts"
    label = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from apps.accounts import schema  # noqa: F401  (registers the OpenAPI auth extension)

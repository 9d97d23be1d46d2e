from __future__ import annotations

from django.apps import AppConfig


class WebConfig(AppConfig):
    """The browser dashboard: thin page views; the pages read everything else from the REST API."""

    name = "apps.web"
    label = "web"
    default_auto_field = "django.db.models.BigAutoField"

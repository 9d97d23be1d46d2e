from __future__ import annotations

from django.apps import AppConfig


class AdviceConfig(AppConfig):
    name = "apps.advice"
    label = "advice"
    verbose_name = "Strategy advice"
    default_auto_field = "django.db.models.BigAutoField"

from django.apps import AppConfig


class DecisionsConfig(AppConfig):
    name = "apps.decisions"
    label = "decisions"
    default_auto_field = "django.db.models.BigAutoField"

from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "apps.core"
    label = "core"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Web and worker alike: the request id crosses into Celery tasks and their log lines.
        from apps.core import task_context  # noqa: F401

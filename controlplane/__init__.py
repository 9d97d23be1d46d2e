"""Project wiring: settings, urls, ASGI routing and the Celery app. No business logic lives here."""

from controlplane.celery import app as celery_app

__all__ = ["celery_app"]

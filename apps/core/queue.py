"""Queueing Celery tasks by name.

Tasks are entry points: they import the services they run. A service that needs a task queued
(a retry path, a delivery) asks for it by its registered name here instead of importing the tasks
module, so imports run one way — tasks → services — and never in a circle.
"""

from __future__ import annotations

from typing import Any

from celery import current_app
from celery.app.task import Task


def task_named(name: str) -> Task:
    """The task registered as ``name``, importing every app's ``tasks`` module the first time."""
    tasks = current_app.tasks
    if name not in tasks:
        # Celery's Django autodiscovery imports the tasks modules only when a worker starts; the web
        # process and the ingester queue tasks too, so import them on first use.
        current_app.loader.import_default_modules()
    try:
        return tasks[name]
    except KeyError:
        raise LookupError(f"no Celery task named {name!r}: is its app in INSTALLED_APPS?") from None


def enqueue(name: str, *, kwargs: dict[str, Any], **options: Any) -> None:
    """``apply_async`` the task ``name`` (options: ``queue``, ``countdown``, ``connection``, ...)."""
    task_named(name).apply_async(kwargs=kwargs, **options)

"""Celery entry points (beat): the NPU time scheduled today, and pruning old history."""

from __future__ import annotations

from typing import Any

from celery import shared_task


@shared_task(name="fleet.refresh_scheduled")
def refresh_scheduled() -> int:
    from apps.fleet.summaries import scheduled_refresh_recent

    return scheduled_refresh_recent()


@shared_task(name="fleet.prune_history")
def prune_history() -> dict[str, Any]:
    from apps.fleet.retention import prune_history as prune

    return prune()

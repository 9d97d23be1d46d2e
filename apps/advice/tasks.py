"""Celery entry point: keep the jobs list's "could save" figure fresh after new incidents."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="advice.refresh_summaries")
def refresh_summaries() -> int:
    from apps.advice.services import summaries_refresh_stale

    return summaries_refresh_stale()

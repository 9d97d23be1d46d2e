"""Beat task: pending admissions the watcher never saw created are marked expired."""

from __future__ import annotations

from celery import shared_task

from apps.admission.pending import pending_expire


@shared_task(name="admission.expire_pending")
def expire_pending() -> int:
    return pending_expire()

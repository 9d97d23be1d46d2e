"""Celery entry points of admission: run a recorded recreate, the sweep that finishes stalled ones,
and the beat task that expires pending admissions the watcher never saw created.

At-least-once (late acks, reject on worker lost): ``recreate_run`` continues from the recorded step,
so a redelivered or duplicated message does no harm.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.conf import settings

from apps.admission.pending import pending_expire
from apps.admission.recreate_ops import RECREATE_TASK, TryAgain, recreate_run, recreates_sweep


@shared_task(bind=True, name=RECREATE_TASK, acks_late=True, reject_on_worker_lost=True, max_retries=None)
def recreate_job(self: Any, *, operation_id: int) -> str:
    try:
        return recreate_run(operation_id)
    except TryAgain as again:
        if self.request.retries >= settings.RECREATE_TASK_RETRIES:
            return "left-for-the-sweep"  # still active: the sweep queues it again
        raise self.retry(countdown=again.delay) from again


@shared_task(name="admission.sweep_recreates")
def sweep_recreates() -> list[int]:
    return recreates_sweep()


@shared_task(name="admission.expire_pending")
def expire_pending() -> int:
    return pending_expire()

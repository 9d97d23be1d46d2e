"""Celery entry points for the write path. Thin: take ids, call a service, own nothing else.

Delivery is at-least-once (late acks, reject on worker lost); every task is idempotent. This module
imports the services; none of them imports it (the push is queued by name, ``syncs.PUSH_TASK``).
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from apps.policies.push import RetryLater, push_sync
from apps.policies.reconcile import reconcile_all, sweep_stuck_syncs
from apps.policies.syncs import PUSH_TASK


@shared_task(bind=True, name=PUSH_TASK, acks_late=True, reject_on_worker_lost=True, max_retries=None)
def push_policy(self: Any, *, sync_id: int, deadline: float | None = None) -> str:
    # The task id survives redelivery and retries, so they may take back their own claim.
    try:
        sync = push_sync(
            sync_id=sync_id,
            token=str(self.request.id or f"sync-{sync_id}"),
            deadline=deadline,
            attempt=self.request.retries,
        )
    except RetryLater as later:
        # Transient (5xx, 429, unreachable, conflicts beyond PUSH_MAX_CONFLICTS): run again after the
        # backoff; the deadline travels with the retry, so the budget covers all attempts together.
        raise self.retry(
            kwargs={"sync_id": sync_id, "deadline": later.deadline}, countdown=later.delay, exc=later.cause
        ) from later
    return sync.state if sync is not None else "not-claimed"


@shared_task(name="policies.sweep_syncs")
def sweep_syncs() -> list[int]:
    return sweep_stuck_syncs()


@shared_task(name="policies.reconcile_drift")
def reconcile_drift() -> int:
    return reconcile_all()

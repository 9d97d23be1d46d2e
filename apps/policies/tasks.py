"""Celery entry points for the write path. Thin: take ids, call a service, own nothing else.

Delivery is at-least-once (late acks, reject on worker lost); every task is idempotent.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task


@shared_task(bind=True, name="policies.push_policy", acks_late=True, reject_on_worker_lost=True)
def push_policy(self: Any, *, sync_id: int) -> str:
    from apps.policies.push import push_sync

    # The task id survives redelivery, so a redelivered message may take back its own claim.
    sync = push_sync(sync_id=sync_id, token=str(self.request.id or f"sync-{sync_id}"))
    return sync.state if sync is not None else "not-claimed"


@shared_task(name="policies.sweep_syncs")
def sweep_syncs() -> list[int]:
    from apps.policies.reconcile import sweep_stuck_syncs

    return sweep_stuck_syncs()


@shared_task(name="policies.reconcile_drift")
def reconcile_drift() -> int:
    from apps.policies.reconcile import reconcile_all

    return reconcile_all()

"""Celery entry points for platform-mode decisions (thin: ids in, services called)."""

from __future__ import annotations

from typing import Any

from celery import shared_task


@shared_task(bind=True, name="decisions.write", acks_late=True, reject_on_worker_lost=True, max_retries=20)
def write_decision(self: Any, *, decision_id: int) -> str:
    from apps.cluster.errors import ClusterError
    from apps.decisions.services import decision_write

    try:
        decision = decision_write(decision_id=decision_id)
    except ClusterError as exc:
        # Transient (5xx, 429, unreachable): try again soon; ClusterD waits up to 300 s.
        raise self.retry(
            exc=exc, countdown=exc.retry_after or min(5, 0.5 * (self.request.retries + 1))
        ) from exc
    return decision.state if decision is not None else "missing"


@shared_task(name="decisions.expire", acks_late=True, reject_on_worker_lost=True)
def expire_decision(*, decision_id: int) -> str:
    from apps.decisions.services import decision_expire

    decision = decision_expire(decision_id=decision_id)
    return decision.state if decision is not None else "missing"


@shared_task(name="decisions.sweep")
def sweep_decisions() -> int:
    from apps.decisions.services import decisions_sweep

    return decisions_sweep()

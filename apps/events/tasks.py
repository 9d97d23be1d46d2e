"""Celery tasks of the events app: webhook delivery with retries and exponential backoff, and the
sweep that re-queues deliveries whose message was lost."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.conf import settings

from apps.cluster.backoff import jittered_delay
from apps.events.webhooks import deliveries_sweep, delivery_attempt, delivery_give_up, delivery_lease


def backoff_seconds(retries: int) -> float:
    """Exponential with full jitter: base·2^n capped, so many failing receivers do not retry in step."""
    return jittered_delay(
        retries,
        initial=settings.WEBHOOK_BACKOFF_BASE_SECONDS,
        maximum=settings.WEBHOOK_BACKOFF_MAX_SECONDS,
        jitter=1.0,
    )


@shared_task(
    bind=True, name="events.deliver_webhook", acks_late=True, reject_on_worker_lost=True, max_retries=None
)
def deliver_webhook(self: Any, *, delivery_id: int) -> str:
    result = delivery_attempt(delivery_id=delivery_id)
    if result is None:
        return "not-pending"
    if result.delivered:
        return "delivered"
    if not result.retryable:
        return "failed"
    max_attempts = settings.WEBHOOK_MAX_ATTEMPTS
    # Counted on the row: a delivery the sweep re-queued keeps its count.
    if result.attempts >= max_attempts:
        delivery_give_up(
            delivery_id=delivery_id, reason=f"gave up after {max_attempts} attempts: {result.error}"
        )
        return "failed"
    countdown = backoff_seconds(result.attempts - 1)
    delivery_lease(delivery_id=delivery_id, seconds=countdown)
    # If the broker cannot take the retry, this raises and the row stays pending for the sweep.
    raise self.retry(countdown=countdown)


@shared_task(name="events.sweep_webhooks")
def sweep_webhooks() -> int:
    return len(deliveries_sweep())

"""Outbound webhooks: incident opened / closed, budget exhausted, decision pending; per namespace.

Each message is a ``WebhookDelivery`` row written in the transaction of the event that caused it
(an outbox: no event without its deliveries, no delivery without its event), queued after commit
and delivered by a Celery task with retries and backoff. A message that never reaches a worker
(broker down, worker killed) leaves its row pending; ``deliveries_sweep`` re-queues pending rows
whose lease (``requeue_after``) has run out, so every delivery is attempted at least once.

The body is JSON; ``X-Signature: sha256=<hex>`` is the
HMAC-SHA256 of ``<X-Timestamp>.<body>`` under the webhook's secret, so a receiver can check both
origin and freshness; ``X-Delivery-Id`` lets it drop a redelivered message.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.core import metrics
from apps.core.compiled import CompiledQuery
from apps.core.queue import task_named
from apps.events.models import Webhook, WebhookDelivery
from apps.events.webhook_urls import OPENER, allow_private, webhook_url_problem
from apps.jobs.models import TrainingJob

log = logging.getLogger(__name__)
DELIVER_TASK = "events.deliver_webhook"  # apps/events/tasks.py
USER_AGENT = "mindcluster-recovery-control-plane/webhooks"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=<hex>`` over ``<timestamp>.<body>``."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def verify(secret: str, timestamp: str, body: bytes, signature: str) -> bool:
    """What a receiver does (and what the tests do)."""
    return hmac.compare_digest(sign(secret, timestamp, body), signature)


def _job_info(job: TrainingJob) -> dict[str, Any]:
    return {"id": job.pk, "cluster": job.cluster.name, "namespace": job.namespace, "name": job.name}


# Asked for every incident opened or closed: compiled once (apps.core.compiled), not per ask.
_COVERING: CompiledQuery[Webhook] = CompiledQuery(
    lambda cluster_id, namespace: Webhook.objects.filter(active=True).filter(
        Q(cluster__isnull=True) | Q(cluster_id=cluster_id), Q(namespace="*") | Q(namespace=namespace)
    ),
    int,
    str,
)


def webhooks_for(job: TrainingJob, kind: str) -> list[Webhook]:
    return [hook for hook in _COVERING(job.cluster_id, job.namespace) if hook.wants(kind)]


def requeue_seconds() -> float:
    """How long a queued (or retrying) delivery may stay pending before the sweep queues it again."""
    return settings.WEBHOOK_REQUEUE_SECONDS


def webhooks_dispatch(
    *, job: TrainingJob, kind: str, payload: dict[str, Any], hooks: list[Webhook] | None = None
) -> list[WebhookDelivery]:
    """Write a delivery of ``kind`` for every webhook covering the job's namespace (``hooks``: those,
    already read), in the caller's transaction, and queue each after commit."""
    body = {"kind": kind, "job": _job_info(job), "sent_at": timezone.now().isoformat(), **payload}
    body = json.loads(json.dumps(body, cls=DjangoJSONEncoder))
    lease = timezone.now() + timedelta(seconds=requeue_seconds())
    deliveries = [
        WebhookDelivery.objects.create(
            webhook=hook, delivery_id=uuid.uuid4(), kind=kind, payload=body, requeue_after=lease
        )
        for hook in (webhooks_for(job, kind) if hooks is None else hooks)
    ]
    for delivery in deliveries:
        transaction.on_commit(partial(delivery_enqueue, delivery.pk))
    return deliveries


def delivery_enqueue(delivery_id: int) -> bool:
    """Queue one delivery; False (logged) when the broker cannot take it: the sweep will."""
    deliver = task_named(DELIVER_TASK)
    if deliver.app.conf.task_always_eager:  # eager mode has no broker to connect to
        deliver.apply_async(kwargs={"delivery_id": delivery_id})
        return True
    try:
        # Fail fast: kombu's default is ~6 s of reconnecting per message, which with the broker
        # down would stall the ingester (this runs after the event's commit, on its thread).
        with deliver.app.pool.acquire(block=True, timeout=2) as acquired:
            conn: Any = acquired  # a kombu Connection (celery-types name the pool's items Producer)
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0.2, interval_max=0.2)
            deliver.apply_async(  # type: ignore[call-arg]  # connection= goes through **options
                kwargs={"delivery_id": delivery_id}, connection=conn, retry=False
            )
    except Exception as exc:
        log.warning(
            "webhook delivery %s could not be queued (%s: %s); it stays pending and the sweep re-queues it",
            delivery_id,
            type(exc).__name__,
            exc,
        )
        return False
    return True


def webhooks_notify(*, kind: str, job: TrainingJob, payload: Callable[[], dict[str, Any]]) -> None:
    """Write the deliveries of an incident or budget notification in the current transaction.

    Most installs have no webhook for most jobs: that is one read, without the savepoint (two
    statements more) that guards writing deliveries."""
    hooks = webhooks_for(job, kind)
    if not hooks:
        return
    try:
        with transaction.atomic():  # a savepoint: a failure here must not undo the event itself
            webhooks_dispatch(job=job, kind=kind, payload=payload(), hooks=hooks)
    except Exception:  # a webhook problem must never break recording events
        log.error("webhook %s for job %s could not be written", kind, job.pk, exc_info=True)


def deliveries_sweep(limit: int = 1000) -> list[int]:
    """Re-queue pending deliveries whose lease ran out (their message was lost); return their ids.

    Each re-queued row gets a new lease first (a conditional update, so two sweeps queue it once),
    so under a backlog a row is queued again once per ``WEBHOOK_REQUEUE_SECONDS``, not per sweep.
    """
    now = timezone.now()
    lease = now + timedelta(seconds=requeue_seconds())
    due = Q(state=WebhookDelivery.State.PENDING) & (
        Q(requeue_after__lt=now) | Q(requeue_after__isnull=True, created_at__lt=now - (lease - now))
    )
    requeued: list[int] = []
    for pk in WebhookDelivery.objects.filter(due).order_by("created_at").values_list("pk", flat=True)[:limit]:
        if WebhookDelivery.objects.filter(due, pk=pk).update(requeue_after=lease) and delivery_enqueue(pk):
            requeued.append(pk)
    return requeued


def delivery_lease(*, delivery_id: int, seconds: float) -> None:
    """Keep the sweep away from a delivery that is waiting for its own retry."""
    WebhookDelivery.objects.filter(pk=delivery_id, state=WebhookDelivery.State.PENDING).update(
        requeue_after=timezone.now() + timedelta(seconds=seconds + requeue_seconds())
    )


@dataclass(frozen=True)
class Attempt:
    """The result of one POST: delivered, or whether trying again may help."""

    delivered: bool
    status: int | None
    error: str
    retryable: bool
    attempts: int = 0  # of the delivery, this one included (set by ``delivery_attempt``)


def post(delivery: WebhookDelivery) -> Attempt:
    """POST the delivery once, signed; never raises."""
    hook = delivery.webhook
    body = json.dumps(delivery.payload, separators=(",", ":"), sort_keys=True).encode()
    timestamp = str(int(time.time()))
    request = urllib.request.Request(
        hook.url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "X-Event": delivery.kind,
            "X-Delivery-Id": str(delivery.delivery_id),
            "X-Timestamp": timestamp,
            "X-Signature": sign(hook.secret, timestamp, body),
        },
    )
    timeout = settings.WEBHOOK_TIMEOUT_SECONDS
    problem = webhook_url_problem(hook.url, allow_private=allow_private())
    if problem:  # checked again at send time: the name may resolve elsewhere now
        return Attempt(False, None, f"refused: {problem}"[:500], False)
    try:
        with OPENER.open(request, timeout=timeout) as response:
            return Attempt(True, response.status, "", False)
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            return Attempt(False, exc.code, f"HTTP {exc.code}: redirects are not followed", False)
        # 4xx says the receiver rejects this message for good, except "try later" statuses.
        retryable = exc.code >= 500 or exc.code in (408, 409, 425, 429)
        return Attempt(False, exc.code, f"HTTP {exc.code} {exc.reason}", retryable)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        return Attempt(False, None, f"{exc.__class__.__name__}: {exc}"[:500], True)


def delivery_attempt(*, delivery_id: int) -> Attempt | None:
    """Send one pending delivery and record the result; None when it is no longer pending."""
    delivery = (
        WebhookDelivery.objects.select_related("webhook")
        .filter(pk=delivery_id, state=WebhookDelivery.State.PENDING)
        .first()
    )
    if delivery is None:
        return None
    result = post(delivery)
    updates: dict[str, Any] = {
        "attempts": delivery.attempts + 1,
        "last_status": result.status,
        "last_error": result.error,
    }
    if result.delivered:
        updates.update(state=WebhookDelivery.State.DELIVERED, delivered_at=timezone.now(), last_error="")
    elif not result.retryable:
        updates["state"] = WebhookDelivery.State.FAILED
    WebhookDelivery.objects.filter(pk=delivery.pk).update(**updates)
    outcome = "delivered" if result.delivered else "retry" if result.retryable else "failed"
    metrics.WEBHOOK_DELIVERIES.labels(result=outcome).inc()
    return Attempt(result.delivered, result.status, result.error, result.retryable, delivery.attempts + 1)


def delivery_give_up(*, delivery_id: int, reason: str) -> None:
    WebhookDelivery.objects.filter(pk=delivery_id, state=WebhookDelivery.State.PENDING).update(
        state=WebhookDelivery.State.FAILED, last_error=reason[:500]
    )

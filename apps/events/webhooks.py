"""Outbound webhooks: incident opened / closed, budget exhausted, decision pending; per namespace.

Each message is a ``WebhookDelivery`` row written before anything is sent, then delivered by a
Celery task with retries and backoff. The body is JSON; ``X-Signature: sha256=<hex>`` is the
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
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.events.models import Incident, RestartBudget, Webhook, WebhookDelivery
from apps.events.webhook_urls import OPENER, allow_private, webhook_url_problem
from apps.jobs.models import TrainingJob

log = logging.getLogger(__name__)
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


def webhooks_for(job: TrainingJob, kind: str) -> list[Webhook]:
    hooks = Webhook.objects.filter(active=True).filter(
        Q(cluster__isnull=True) | Q(cluster_id=job.cluster_id), Q(namespace="*") | Q(namespace=job.namespace)
    )
    return [hook for hook in hooks if hook.wants(kind)]


def webhooks_dispatch(*, job: TrainingJob, kind: str, payload: dict[str, Any]) -> list[WebhookDelivery]:
    """Queue ``kind`` with ``payload`` to every webhook covering the job's namespace."""
    from apps.events.tasks import deliver_webhook

    body = {"kind": kind, "job": _job_info(job), "sent_at": timezone.now().isoformat(), **payload}
    body = json.loads(json.dumps(body, cls=DjangoJSONEncoder))
    deliveries = [
        WebhookDelivery.objects.create(webhook=hook, delivery_id=uuid.uuid4(), kind=kind, payload=body)
        for hook in webhooks_for(job, kind)
    ]
    for delivery in deliveries:
        transaction.on_commit(partial(deliver_webhook.delay, delivery_id=delivery.pk))
    return deliveries


def webhooks_notify(*, kind: str, object_id: int) -> None:
    """Build the payload for an incident or budget notification and dispatch it (after commit)."""
    try:
        if kind.startswith("incident."):
            incident = Incident.objects.select_related("job__cluster").get(pk=object_id)
            webhooks_dispatch(job=incident.job, kind=kind, payload={"incident": incident.as_dict()})
        elif kind == "budget.exhausted":
            budget = RestartBudget.objects.select_related("job__cluster").get(job_id=object_id)
            webhooks_dispatch(job=budget.job, kind=kind, payload={"budget": budget.as_dict()})
    except Exception:  # a webhook problem must never break recording events
        log.warning("webhook %s for %s could not be queued", kind, object_id, exc_info=True)


@dataclass(frozen=True)
class Attempt:
    """The result of one POST: delivered, or whether trying again may help."""

    delivered: bool
    status: int | None
    error: str
    retryable: bool


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
    timeout = float(getattr(settings, "WEBHOOK_TIMEOUT_SECONDS", 5.0))
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
    return result


def delivery_give_up(*, delivery_id: int, reason: str) -> None:
    WebhookDelivery.objects.filter(pk=delivery_id, state=WebhookDelivery.State.PENDING).update(
        state=WebhookDelivery.State.FAILED, last_error=reason[:500]
    )

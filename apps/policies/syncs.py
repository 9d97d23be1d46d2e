"""The push outbox: create and re-arm ``PolicySync`` rows, queue their pushes, read their specs.

Shared by the write API (``services``, ``api.views``), the push and the sweeps (``reconcile``).
The push task is queued by name (``PUSH_TASK``): ``tasks`` imports ``push`` and ``reconcile``,
never the other way round, so the write path has no import cycle.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from kombu.utils.url import maybe_sanitize_url

from apps.cluster.errors import ClusterError
from apps.core.queue import enqueue
from apps.jobs.models import TrainingJob
from apps.policies.models import PolicyRevision, PolicySync
from apps.policies.spec import PolicySpec

log = logging.getLogger(__name__)
State = PolicySync.State
PUSH_TASK = "policies.push_policy"


def spec_of(revision: PolicyRevision) -> PolicySpec:
    """The revision's spec, as validated when it was stored (see ``PolicySpec.from_stored``).

    A push does not validate again: the spec was checked once, against the job, when it was stored,
    and a revision never changes. What remains is a guard for a stored shape this version cannot
    read (a field renamed since): that is a permanent failure with a reason, not a crashed task.
    """
    try:
        return PolicySpec.from_stored(revision.spec)
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise ClusterError(
            f"revision {revision.number} is stored in a form this version cannot read ({exc})",
            permanent=True,
        ) from exc


def sync_create(*, revision: PolicyRevision) -> PolicySync:
    """Create the outbox row for a new revision and queue its push after commit."""
    sync = PolicySync.objects.create(job=revision.job, revision=revision, generation=revision.number)
    transaction.on_commit(lambda: enqueue_push(sync.pk))
    return sync


def enqueue_push(sync_id: int) -> None:
    """Queue the push of ``sync_id``, or log why not: the row stays pending and the sweep re-queues it.

    One attempt (no publish retries), each broker call bounded by ``BROKER_TIMEOUT_SECONDS``: this
    runs after the commit of an API write, whose caller should not wait on a broker that is down.
    """
    try:
        enqueue(PUSH_TASK, kwargs={"sync_id": sync_id}, queue=settings.CELERY_PUSH_QUEUE, retry=False)
    except Exception as exc:  # broker down or not answering
        log.warning(
            "could not queue the push of sync %s: the broker %s did not take it within %ss (%s: %s); "
            "the row stays pending and the sweep re-queues it within SWEEP_INTERVAL_SECONDS",
            sync_id,
            maybe_sanitize_url(settings.CELERY_BROKER_URL),
            settings.BROKER_TIMEOUT_SECONDS,
            type(exc).__name__,
            exc,
        )


def sync_request_apply(*, job: TrainingJob) -> PolicySync:
    """Push the current revision again (the API's ``apply``): reuse its row, reset it to pending."""
    if job.current_revision is None:
        raise ValueError("the job has no policy yet")
    with transaction.atomic():
        sync, _ = PolicySync.objects.get_or_create(
            job=job, generation=job.current_revision.number, defaults={"revision": job.current_revision}
        )
        PolicySync.objects.filter(pk=sync.pk).exclude(state=State.APPLYING).update(
            state=State.PENDING, retryable=True, claim_token="", lease_expires_at=None, finished_at=None
        )
        transaction.on_commit(lambda: enqueue_push(sync.pk))
    sync.refresh_from_db()
    return sync

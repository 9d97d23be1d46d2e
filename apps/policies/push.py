"""Putting a policy revision into the cluster: claim the outbox row, read, write, record. I/O only.

What to write comes from ``desired`` (``desired_state`` and the patches in ``desired.diff``); this
module reads the live objects, writes the differences and records the outcome.

Idempotent on (job, revision): every object we write carries the revision number in the
``recovery.mindcluster.io/policy-revision`` annotation, and an object that already has the
desired content is not written again, so a redelivered task, a retry or a sweep re-queue is
harmless. Only policy-owned keys are written (merge patches of the difference); every write
carries a ``resourceVersion`` precondition, and a 409 means "re-read and try again" at once.
Any other transient error ends the attempt with ``RetryLater``: the Celery task retries it later
(``self.retry`` with backoff) until the retry budget is spent, and the row keeps its lease meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone

from apps.cluster import client as kube
from apps.cluster.backoff import jittered_delay
from apps.cluster.errors import ClusterError
from apps.core import metrics
from apps.core.numbers import ascii_int
from apps.events.services import event_record
from apps.jobs.clusters import cluster_ref
from apps.jobs.incarnations import incarnation_observe_podgroup
from apps.jobs.models import TrainingJob
from apps.policies.desired import (
    DesiredState,
    ascendjob_patch,
    configmap_current,
    configmap_is_ours,
    configmap_replacement,
    desired_state,
    podgroup_patch,
)
from apps.policies.models import PolicySync
from apps.policies.spec import PolicySpec
from apps.policies.syncs import spec_of
from mindcluster import keys as c

log = logging.getLogger(__name__)
State = PolicySync.State
T = TypeVar("T")
# Called with a stage name ("claimed", "pushed:ascendjob", ...) as a push passes it. Production passes
# nothing; a test passes a callable that blocks, to interleave two pushes deterministically.
Checkpoint = Callable[[str], None]


def _no_checkpoint(stage: str) -> None:
    return None


class RetryLater(Exception):
    """A transient failure within the retry budget: run the push again in ``delay`` seconds.

    The row stays ``applying`` under the same claim (and a lease that outlasts the delay), so the
    retry (same task id, same token) takes it back and nobody else does meanwhile.
    """

    def __init__(self, delay: float, deadline: float, cause: ClusterError) -> None:
        super().__init__(f"retry in {delay:.2f}s: {cause.message}")
        self.delay = delay
        self.deadline = deadline
        self.cause = cause


def _claim(sync_id: int, token: str) -> PolicySync | None:
    """Take the row for this task; a redelivery of the same task (same id) may take it back."""
    now = timezone.now()
    lease = now + timedelta(seconds=settings.PUSH_LEASE_SECONDS)
    claimable = (
        Q(state=State.PENDING)
        | Q(state=State.APPLYING, lease_expires_at__lt=now)
        | Q(state=State.APPLYING, claim_token=token)
    )
    # A retry or redelivery of the same task (same token) keeps the push's start time.
    started = Case(When(state=State.APPLYING, claim_token=token, then=F("started_at")), default=Value(now))
    updated = PolicySync.objects.filter(claimable, pk=sync_id).update(
        state=State.APPLYING, claim_token=token, lease_expires_at=lease, started_at=started
    )
    if updated != 1:
        return None
    return PolicySync.objects.select_related("job__cluster", "revision").get(pk=sync_id)


def _superseded(sync: PolicySync) -> bool:
    return (
        PolicySync.objects.filter(job_id=sync.job_id, generation__gt=sync.generation)
        .exclude(state=State.SUPERSEDED)
        .exists()
    )


# --- the push ----------------------------------------------------------------------------------------
@dataclass
class _Progress:
    sync: PolicySync
    versions: dict[str, str] = field(default_factory=dict)
    writes: int = 0

    def failed_attempt(self, exc: ClusterError, hold: float = 0.0) -> None:
        """Count the attempt and say why; keep the lease for ``hold`` seconds more than usual."""
        self.sync.attempts += 1
        self.sync.last_error = explain(exc)
        # Extend the lease while we keep trying, so the sweep does not start a second pusher.
        PolicySync.objects.filter(pk=self.sync.pk).update(
            attempts=self.sync.attempts,
            last_error=self.sync.last_error,
            lease_expires_at=timezone.now() + timedelta(seconds=settings.PUSH_LEASE_SECONDS + hold),
        )


def explain(exc: ClusterError) -> str:
    """A sentence a user understands, from a cluster error."""
    if exc.status == 403:
        return f"the control plane is not allowed to change this object (403): {exc.message}"
    if exc.status == 404:
        return f"the object is not in the cluster (404): {exc.message}"
    if exc.status == 422:
        return f"the cluster rejected the change as invalid (422): {exc.message}"
    if exc.status == 429:
        return f"the cluster asked us to slow down (429); retrying: {exc.message}"
    if exc.status == 409:
        return f"the object changed while we wrote it (409); re-reading: {exc.message}"
    if exc.status and exc.status >= 500:
        return f"the cluster's API server failed ({exc.status}); retrying: {exc.message}"
    return exc.message


def push_sync(
    *,
    sync_id: int,
    token: str,
    deadline: float | None = None,
    attempt: int = 0,
    checkpoint: Checkpoint = _no_checkpoint,
) -> PolicySync | None:
    """Claim and push one outbox row; returns the row in its final state, or None if not ours.

    ``deadline`` (``time.time()``) ends the retries; the first attempt sets it from
    ``PUSH_RETRY_BUDGET_SECONDS``. ``attempt`` (retries so far) scales the backoff. Raises
    ``RetryLater`` when a transient error should be retried within the budget.
    """
    sync = _claim(sync_id, token)
    if sync is None:
        return None
    if _superseded(sync):
        return _mark_superseded(sync)
    checkpoint("claimed")
    if deadline is None:
        deadline = time.time() + settings.PUSH_RETRY_BUDGET_SECONDS
    progress = _Progress(sync=sync)
    try:
        spec = spec_of(sync.revision)
        ref = cluster_ref(sync.job.cluster)
        state = _reread_on_conflict(progress, lambda: _push_ascendjob(progress, ref, spec))
        checkpoint("pushed:ascendjob")
        _reread_on_conflict(progress, lambda: _push_podgroup(progress, ref, state))
        checkpoint("pushed:podgroup")
        _reread_on_conflict(progress, lambda: _push_configmap(progress, ref, state))
    except ClusterError as exc:
        return _after_failure(progress, exc, deadline, attempt)
    except _Superseded:
        return _mark_superseded(sync)
    return _finish_applied(progress, state)


class _Superseded(Exception):
    pass


def _mark_superseded(sync: PolicySync) -> PolicySync:
    PolicySync.objects.filter(pk=sync.pk).update(state=State.SUPERSEDED, finished_at=timezone.now())
    metrics.POLICY_PUSHES.labels(result="superseded").inc()
    return PolicySync.objects.get(pk=sync.pk)


def _reread_on_conflict(progress: _Progress, step: Callable[[], T]) -> T:
    """Run ``step``; on a 409 (somebody wrote in between) re-read and run it again at once."""
    conflicts = 0
    while True:
        try:
            return step()
        except ClusterError as exc:
            if not exc.conflict or conflicts >= settings.PUSH_MAX_CONFLICTS:
                raise
            conflicts += 1
            progress.failed_attempt(exc)
            if _superseded(progress.sync):
                raise _Superseded from exc


def _after_failure(progress: _Progress, exc: ClusterError, deadline: float, attempt: int) -> PolicySync:
    """Fail for good, give way to a newer revision, or raise ``RetryLater`` within the budget."""
    sync = progress.sync
    if exc.permanent:
        progress.failed_attempt(exc)
        return _finish_failed(sync, exc)
    delay = exc.retry_after if exc.retry_after is not None else _backoff(attempt + 1)
    progress.failed_attempt(exc, hold=delay)
    if _superseded(sync):
        return _mark_superseded(sync)
    if time.time() + delay > deadline:
        return _finish_failed(
            sync,
            ClusterError(
                f"gave up after {sync.attempts} attempts: {explain(exc)}", permanent=False, status=exc.status
            ),
        )
    raise RetryLater(delay, deadline, exc)


def _backoff(attempt: int) -> float:
    """The shared jittered backoff, capped so recovery is noticed within seconds."""
    return jittered_delay(
        attempt, initial=settings.PUSH_BACKOFF_BASE_SECONDS, maximum=settings.PUSH_BACKOFF_MAX_SECONDS
    )


def _refuse_newer(progress: _Progress, live: dict[str, Any]) -> None:
    """Never write over a newer revision: the DB check in ``push_sync`` ran before this read.

    Revision N may pass that check, then read the object after N+1 wrote it; without this it
    would patch N over N+1 (the ``resourceVersion`` precondition only catches writes *between*
    our read and our write, and those end here on the re-read). An annotation naming a revision
    this job never had (an object left over from another control plane) is not "newer".
    """
    revision = revision_in_annotations((live.get("metadata") or {}).get("annotations") or {})
    if revision is None or revision <= progress.sync.generation:
        return
    if PolicySync.objects.filter(job_id=progress.sync.job_id, generation=revision).exists():
        raise _Superseded


def revision_in_annotations(annotations: Any) -> int | None:
    """The revision a live object's ``policy-revision`` annotation names, or None for anything else.

    Anyone with write access to the AscendJob can put text there: "²" passes ``isdigit()`` but not
    ``int()``, and a push that raised on it was re-queued forever.
    """
    value = annotations.get(c.ANNOTATION_POLICY_REVISION) if isinstance(annotations, dict) else None
    return ascii_int(value, 18) if isinstance(value, str) else None


def _push_ascendjob(progress: _Progress, ref: kube.ClusterRef, spec: PolicySpec) -> DesiredState:
    job = progress.sync.job
    live = kube.get_ascendjob(ref, job.namespace, job.name)
    _refuse_newer(progress, live)
    live_uid = str((live.get("metadata") or {}).get("uid", ""))
    if live_uid and live_uid != job.uid:
        TrainingJob.objects.filter(pk=job.pk).update(uid=live_uid)
        job.uid = live_uid
    state = desired_state(live, spec, progress.sync.generation)
    patch = ascendjob_patch(live, state)
    if not patch:
        progress.versions["ascendjob"] = str(live["metadata"].get("resourceVersion", ""))
        return state
    patch.setdefault("metadata", {})["resourceVersion"] = live["metadata"]["resourceVersion"]
    result = kube.patch_ascendjob(ref, job.namespace, job.name, patch)
    progress.writes += 1
    progress.versions["ascendjob"] = str(result["metadata"].get("resourceVersion", ""))
    return state


def _push_podgroup(progress: _Progress, ref: kube.ClusterRef, state: DesiredState) -> None:
    job = progress.sync.job
    name = kube.podgroup_name(job.name, job.uid)
    try:
        live = kube.get_podgroup(ref, job.namespace, name)
    except ClusterError as exc:
        if exc.not_found:
            # The operator creates it from the job's metadata (already patched) when it schedules the job.
            progress.versions["podgroup"] = "absent: the operator will copy the job's keys when it creates it"
            return
        raise
    # What it was created with, before our first write to it (the in-effect view reads this).
    incarnation_observe_podgroup(job, live, "push")
    _refuse_newer(progress, live)
    patch = podgroup_patch(live, state)
    if not patch:
        progress.versions["podgroup"] = str(live["metadata"].get("resourceVersion", ""))
        return
    patch["resourceVersion"] = live["metadata"]["resourceVersion"]
    result = kube.patch_podgroup(ref, job.namespace, name, {"metadata": patch})
    progress.writes += 1
    progress.versions["podgroup"] = str(result["metadata"].get("resourceVersion", ""))


def _push_configmap(progress: _Progress, ref: kube.ClusterRef, state: DesiredState) -> None:
    job = progress.sync.job
    name = state.configmap_name
    try:
        live: dict[str, Any] | None = kube.get_configmap(ref, job.namespace, name)
    except ClusterError as exc:
        if not exc.not_found:
            raise
        live = None
    if live is not None:
        _refuse_newer(progress, live)
    elif _superseded(progress.sync):
        raise _Superseded  # a newer revision may have deleted it: do not create it again
    desired = state.configmap
    if desired is None:
        if live is not None and configmap_is_ours(live):
            kube.delete_configmap(ref, job.namespace, name, live["metadata"]["resourceVersion"])
            progress.writes += 1
        progress.versions["configmap"] = "none"
        return
    if live is None:
        result = kube.create_configmap(ref, job.namespace, desired)
    elif configmap_current(live, desired):
        progress.versions["configmap"] = str((live.get("metadata") or {}).get("resourceVersion", ""))
        return
    else:
        result = kube.replace_configmap(ref, job.namespace, name, configmap_replacement(live, desired))
    progress.writes += 1
    progress.versions["configmap"] = str(result["metadata"].get("resourceVersion", ""))


def _finish_applied(progress: _Progress, state: DesiredState) -> PolicySync:
    sync = progress.sync
    effects = [{"target": e.target, "when": e.when, "summary": e.summary} for e in state.rendered.effects]
    now = timezone.now()
    with transaction.atomic():  # the state and its event become visible together
        _mark_applied(sync, progress, effects, now)
    return PolicySync.objects.get(pk=sync.pk)


def _mark_applied(sync: PolicySync, progress: _Progress, effects: list[dict[str, str]], now: Any) -> None:
    PolicySync.objects.filter(pk=sync.pk).update(
        state=State.APPLIED,
        finished_at=now,
        applied_resource_versions=progress.versions,
        effects=effects,
        last_error="",
        retryable=True,
        drift=[],
        checked_at=now,
        lease_expires_at=None,
    )
    sync.refresh_from_db()
    metrics.POLICY_PUSHES.labels(result="applied").inc()
    metrics.POLICY_PUSH_SECONDS.observe(max(0.0, (now - sync.queued_at).total_seconds()))
    started = sync.started_at.isoformat() if sync.started_at else ""
    event_record(
        job=sync.job,
        kind="policy.applied",
        source="push",
        message=f"policy revision {sync.generation} applied ({progress.writes} writes)",
        data={
            "revision": sync.generation,
            "resource_versions": progress.versions,
            "effects": effects,
            "duration_ms": sync.duration_ms,
        },
        # One event per push attempt that ended applied (a redelivered task does not repeat it).
        dedupe_key=f"policy.applied:{sync.generation}:{started}",
    )


def _finish_failed(sync: PolicySync, exc: ClusterError) -> PolicySync:
    message = explain(exc) if not exc.message.startswith("gave up") else exc.message
    with transaction.atomic():  # the state and its event become visible together
        _mark_failed(sync, exc, message)
    return PolicySync.objects.get(pk=sync.pk)


def _mark_failed(sync: PolicySync, exc: ClusterError, message: str) -> None:
    PolicySync.objects.filter(pk=sync.pk).update(
        state=State.FAILED,
        finished_at=timezone.now(),
        last_error=message,
        retryable=not exc.permanent,
        lease_expires_at=None,
    )
    sync.refresh_from_db()
    metrics.POLICY_PUSHES.labels(result="failed").inc()
    event_record(
        job=sync.job,
        kind="policy.failed",
        source="push",
        severity="error",
        message=f"policy revision {sync.generation} failed: {message}"[:500],
        data={"revision": sync.generation, "status": exc.status, "retryable": not exc.permanent},
    )

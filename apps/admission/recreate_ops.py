"""Recreate as a durable operation (design §4.6, issue #24 item 3).

The request records a :class:`RecreateOperation` with the manifest to create (and the live job as it
was, for a roll back) *before* anything is deleted, and queues a Celery task. The task advances the
operation one recorded step at a time, under a per-job PostgreSQL advisory lock:

``pending`` → (the row's uid becomes ``recreating``) → ``deleting`` → (the old job is gone) →
``creating`` → ``done``; a create the cluster refuses for good (4xx other than a conflict) →
``rolling_back`` (create the job as it was) → ``rolled_back``.

Every step is idempotent, so a task that is re-delivered, retried, or re-queued by the sweep after
its worker died continues from the recorded state: a job we created but did not record yet is
recognised by the operation's annotation on it. Transient failures (5xx, unreachable, throttled)
are retried with the shared backoff; when the task's retries are spent the operation stays active
and ``recreates_sweep`` (a beat entry) queues it again, so the job is never left absent and the
row never keeps uid ``recreating``.

A second recreate of a job while one is active is refused (409 naming it): a partial unique
index on the table makes that hold across processes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from apps.admission.models import RecreateOperation
from apps.admission.recreate import (
    RECREATING_UID,
    RecoveryInProgress,
    RecreateFailed,
    as_new_object,
    fresh_manifest,
    recovery_in_progress,
)
from apps.audit.actors import Actor
from apps.audit.services import audit_record
from apps.cluster import client as kube
from apps.cluster.backoff import jittered_delay
from apps.cluster.errors import ClusterError
from apps.core.errors import ApplicationError
from apps.core.queue import enqueue
from apps.events import kinds
from apps.events.services import event_record
from apps.jobs.clusters import cluster_ref
from apps.jobs.models import TrainingJob
from apps.policies.models import PolicyRevision

log = logging.getLogger(__name__)

RECREATE_TASK = "admission.recreate"
# Stamped on the job we create, so a re-run recognises its own creation after a crash.
ANNOTATION_OPERATION = "recovery.mindcluster.io/recreate-operation"
LOCK_NAMESPACE = 0x7263  # first key of the two-int advisory lock: "rc"
State = RecreateOperation.State


class RecreateInProgress(ApplicationError):
    def __init__(self, operation: RecreateOperation) -> None:
        self.operation = operation
        super().__init__(
            f"Recreate {operation.pk} of this job is in progress ({operation.state}); wait for it to finish."
        )


class TryAgain(Exception):
    """A transient failure: run the operation again after ``delay`` seconds."""

    def __init__(self, message: str, delay: float) -> None:
        super().__init__(message)
        self.delay = delay


# --- the request ---------------------------------------------------------------------------------
def recreate_request(*, job: TrainingJob, revision: PolicyRevision, actor: Actor) -> RecreateOperation:
    """Record the operation (manifest rendered, nothing deleted yet) and queue its task."""
    incident = recovery_in_progress(job)
    if incident is not None:
        raise RecoveryInProgress(
            f"Incident {incident.number} of this job is still open (MindCluster is recovering it); "
            "recreate it once the incident has closed."
        )
    active = _active_of(job)
    if active is not None:
        raise RecreateInProgress(active)
    try:
        live = kube.get_ascendjob(cluster_ref(job.cluster), job.namespace, job.name)
    except ClusterError as err:
        raise RecreateFailed(f"Could not read the job from the cluster: {err.message}") from err
    manifest = fresh_manifest(live, revision)
    original = as_new_object(live)
    with transaction.atomic():
        try:
            with transaction.atomic():
                operation = RecreateOperation.objects.create(
                    job=job,
                    revision=revision.number,
                    manifest=manifest,
                    original=original,
                    old_uid=str(live["metadata"].get("uid", "")),
                    actor=actor.account,
                    actor_name=actor.display_name,
                    request_id=actor.request_id,
                )
        except IntegrityError:  # another request recorded one between our check and our insert
            raise RecreateInProgress(_active_of(job) or RecreateOperation(job=job)) from None
        for body in (operation.manifest, operation.original):
            annotations = body.setdefault("metadata", {}).setdefault("annotations", {})
            annotations[ANNOTATION_OPERATION] = str(operation.pk)
        _record(operation, State.PENDING, "recorded", revision=revision.number)
        audit_record(
            actor=actor,
            action="job.recreate_requested",
            obj=job,
            after={"operation": operation.pk, "revision": revision.number, "uid": operation.old_uid},
        )
        transaction.on_commit(lambda: enqueue_recreate(operation.pk))
    return operation


def enqueue_recreate(operation_id: int, countdown: float = 0.0) -> None:
    """Queue the task; if the broker does not take it, the sweep queues it later."""
    try:
        enqueue(RECREATE_TASK, kwargs={"operation_id": operation_id}, countdown=countdown, retry=False)
    except Exception as exc:  # broker down or not answering: the row stays active for the sweep
        log.warning(
            "could not queue recreate %s (%s: %s); the sweep will", operation_id, type(exc).__name__, exc
        )


def _active_of(job: TrainingJob) -> RecreateOperation | None:
    return RecreateOperation.objects.filter(job=job, state__in=RecreateOperation.ACTIVE).first()


# --- the task's work -----------------------------------------------------------------------------
def recreate_run(operation_id: int) -> str:
    """Advance the operation as far as it goes now; returns its state ("busy": another run has it).

    Raises :class:`TryAgain` on a transient failure (the operation stays active).
    """
    operation = RecreateOperation.objects.filter(pk=operation_id).select_related("job__cluster").first()
    if operation is None:
        return "missing"
    if operation.state not in RecreateOperation.ACTIVE:
        return operation.state
    with job_lock(operation.job_id) as held:
        if not held:
            return "busy"  # the holder finishes it; if it dies, its lock goes and the sweep re-runs
        operation.refresh_from_db()
        if operation.state not in RecreateOperation.ACTIVE:
            return operation.state
        _advance(operation)
        return operation.state


@contextmanager
def job_lock(job_id: int) -> Iterator[bool]:
    """A session advisory lock on the job: held until released or until the process dies."""
    if connection.vendor != "postgresql":
        yield True
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_NAMESPACE, job_id])
        held = bool(cursor.fetchone()[0])
    try:
        yield held
    finally:
        if held:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, job_id])


def _advance(operation: RecreateOperation) -> None:
    job = operation.job
    ref = cluster_ref(job.cluster)
    if operation.state == State.PENDING:
        # Before the delete: the watcher's DELETED for the old UID must not close the history.
        TrainingJob.objects.filter(pk=job.pk).update(uid=RECREATING_UID)
        _record(operation, State.DELETING, "deleting the old job")
    if operation.state == State.DELETING:
        live = _live(ref, job)
        if live is not None and _uid(live) == operation.old_uid:
            _call(operation, lambda: _delete(ref, job, operation.old_uid))
            _call(operation, lambda: _wait_gone(ref, job, operation.old_uid))
            live = None
        if live is not None and not _ours(live, operation):
            _fail(operation, f"another job named {job.name} appeared (UID {_uid(live)})")
            return
        _record(operation, State.CREATING, "the old job is gone")
    if operation.state in (State.CREATING, State.ROLLING_BACK):
        _create_step(operation, ref)


def _create_step(operation: RecreateOperation, ref: kube.ClusterRef) -> None:
    job = operation.job
    rolling_back = operation.state == State.ROLLING_BACK
    live = _live(ref, job)
    if live is not None:
        if _ours(live, operation):  # created by an earlier run that died before recording it
            _finish(operation, live, rolled_back=rolling_back)
        else:
            _fail(operation, f"another job named {job.name} appeared (UID {_uid(live)})")
        return
    body = operation.original if rolling_back else operation.manifest
    try:
        created = kube.create_ascendjob(ref, job.namespace, body)
    except ClusterError as err:
        operation.attempts += 1
        operation.last_error = err.message
        if err.status == 409:  # AlreadyExists: read it on the next run (ours, or someone else's)
            _record(operation, operation.state, "create conflicted", error=err.message)
            raise TryAgain(err.message, 0.5) from err
        if err.permanent and not rolling_back:
            # The cluster will never take the new manifest (invalid, denied): put the old job back.
            _record(operation, State.ROLLING_BACK, "create refused; rolling back", error=err.message)
            _create_step(operation, ref)
            return
        _record(operation, operation.state, "create failed", error=err.message)
        raise TryAgain(err.message, _delay(operation.attempts - 1)) from err
    _finish(operation, created, rolled_back=rolling_back)


def _finish(operation: RecreateOperation, created: dict[str, Any], *, rolled_back: bool) -> None:
    job = operation.job
    new_uid = _uid(created)
    with transaction.atomic():
        TrainingJob.objects.filter(pk=job.pk).update(uid=new_uid, deleted_at=None, phase="")
        operation.new_uid = new_uid
        operation.finished_at = timezone.now()
        if rolled_back:
            _record(operation, State.ROLLED_BACK, "the job as it was is back", uid=new_uid)
            _audit(operation, "job.recreate_rolled_back", uid=new_uid, error=operation.last_error)
            return
        _record(operation, State.DONE, "created", uid=new_uid)
        _audit(operation, "job.recreate", uid=new_uid, revision=operation.revision)
        event_record(
            job=job,
            kind=kinds.JOB_RECREATED,
            message=f"Recreated with policy revision {operation.revision} "
            f"(UID {operation.old_uid} → {new_uid})",
            source="recreate",
            data={"old_uid": operation.old_uid, "new_uid": new_uid, "revision": operation.revision},
            dedupe_key=f"recreate-{operation.pk}",
        )


def _fail(operation: RecreateOperation, reason: str) -> None:
    """Someone else's job holds the name: nothing of ours to finish; the adopter follows theirs."""
    with transaction.atomic():
        TrainingJob.objects.filter(pk=operation.job_id, uid=RECREATING_UID).update(uid=operation.old_uid)
        operation.last_error = reason
        operation.finished_at = timezone.now()
        _record(operation, State.FAILED, "failed", error=reason)
        _audit(operation, "job.recreate_failed", error=reason, manifest=operation.manifest)


def _audit(operation: RecreateOperation, action: str, **after: Any) -> None:
    """The outcome, in the name of whoever asked for the recreate."""
    audit_record(
        actor=Actor(user=operation.actor, name=operation.actor_name, request_id=operation.request_id),
        action=action,
        obj=operation.job,
        before={"uid": operation.old_uid},
        after={**after, "operation": operation.pk},
    )


def _record(operation: RecreateOperation, state: str, step: str, **data: Any) -> None:
    operation.state = state
    operation.steps = [
        *operation.steps,
        {"at": timezone.now().isoformat(), "state": state, "step": step, **data},
    ]
    operation.save(
        update_fields=[
            "state",
            "steps",
            "attempts",
            "last_error",
            "new_uid",
            "finished_at",
            "manifest",
            "original",
            "updated_at",
        ]
    )


def _call(operation: RecreateOperation, step: Any) -> None:
    """Run a delete-side step; a cluster error is recorded and retried later."""
    try:
        step()
    except ClusterError as err:
        operation.last_error = err.message
        _record(operation, operation.state, "cluster call failed", error=err.message)
        failures = sum(1 for step in operation.steps if step.get("step") == "cluster call failed")
        raise TryAgain(err.message, _delay(failures - 1)) from err


def _delay(attempt: int) -> float:
    return jittered_delay(
        attempt, initial=settings.RECREATE_BACKOFF_BASE_SECONDS, maximum=settings.RECREATE_BACKOFF_MAX_SECONDS
    )


def _live(ref: kube.ClusterRef, job: TrainingJob) -> dict[str, Any] | None:
    try:
        return kube.get_ascendjob(ref, job.namespace, job.name)
    except ClusterError as err:
        if err.not_found:
            return None
        raise TryAgain(err.message, 1.0) from err


def _uid(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))


def _ours(live: dict[str, Any], operation: RecreateOperation) -> bool:
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    return annotations.get(ANNOTATION_OPERATION) == str(operation.pk) and _uid(live) != operation.old_uid


def _delete(ref: kube.ClusterRef, job: TrainingJob, old_uid: str) -> None:
    try:
        kube.delete_ascendjob(ref, job.namespace, job.name, old_uid)
    except ClusterError as err:
        if not err.not_found:  # gone already: a re-run after the delete went through
            raise


def _wait_gone(ref: kube.ClusterRef, job: TrainingJob, old_uid: str) -> None:
    """Wait until the old incarnation is gone (its dependents go in the background, as before)."""
    wait = float(settings.RECREATE_DELETE_WAIT_SECONDS)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            live = kube.get_ascendjob(ref, job.namespace, job.name)
        except ClusterError as err:
            if err.not_found:
                return
            raise
        if _uid(live) != old_uid:
            return  # replaced: the caller tells ours from someone else's
        time.sleep(0.1)
    raise ClusterError(f"the old job was not gone after {wait:.0f} s", permanent=False)


# --- the sweep -----------------------------------------------------------------------------------
def recreates_sweep(*, stalled_after: timedelta | None = None) -> list[int]:
    """Queue again every active operation nobody advanced for ``stalled_after``: a worker died
    between two steps, the task's retries are spent, or the broker lost the message."""
    if stalled_after is None:
        stalled_after = timedelta(seconds=settings.RECREATE_STALL_SECONDS)
    stalled = list(
        RecreateOperation.objects.filter(
            state__in=RecreateOperation.ACTIVE, updated_at__lt=timezone.now() - stalled_after
        ).values_list("pk", flat=True)
    )
    for operation_id in stalled:
        enqueue_recreate(operation_id)
    return stalled

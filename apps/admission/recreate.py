"""Recreate an AscendJob so its creation-time keys take effect (design §4.6).

MindCluster reads ``recover-strategy``, the rescheduling labels, ``backoffLimit`` and the platform
mode switch only when a job is created (facts §1: ClusterD at the first ``Init``,
``component/clusterd/pkg/application/recover/fault_recover_service.go:570-592``; the operator in
its create handler, ``component/ascend-operator/pkg/controllers/v1/ascendjob_controller.go:365-400``),
so the only way to put a new revision of those keys in force is a new job. The row, its revisions,
events and incidents stay one history: the row keeps its id and only its ``uid`` changes.

Refused while a recovery is in progress (an open incident, i.e. ClusterD is mid-way through a
strategy): deleting the job then would abort the recovery and lose its outcome.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from apps.audit.actors import Actor
from apps.audit.services import audit_record
from apps.cluster import client as kube
from apps.cluster.errors import ClusterError
from apps.core.errors import ApplicationError
from apps.events import kinds
from apps.events.models import Incident
from apps.events.services import event_record
from apps.jobs.clusters import cluster_ref
from apps.jobs.models import TrainingJob
from apps.policies.desired import desired_state
from apps.policies.models import PolicyRevision
from apps.policies.spec import JobContext
from apps.policies.validation import validate_policy

# Set on the row while the old incarnation is being replaced, so the watcher's DELETED for the
# old UID (``job_mark_deleted`` matches by UID) does not close the job's history.
RECREATING_UID = "recreating"
DELETE_WAIT_SECONDS = 30.0
_SERVER_FIELDS = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
)


class RecoveryInProgress(ApplicationError):
    status_code = 409
    code = "recovery_in_progress"


class RecreateFailed(ApplicationError):
    status_code = 409
    code = "recreate_failed"


@dataclass(frozen=True)
class Recreated:
    job: TrainingJob
    old_uid: str
    new_uid: str
    revision: int


def recovery_in_progress(job: TrainingJob) -> Incident | None:
    return Incident.objects.filter(job=job, closed_at__isnull=True).first()


def fresh_manifest(live: dict[str, Any], revision: PolicyRevision) -> dict[str, Any]:
    """The live job as a new object: server-set fields and status dropped, ``revision`` merged."""
    manifest = copy.deepcopy(live)
    manifest.pop("status", None)
    meta = manifest.setdefault("metadata", {})
    for key in _SERVER_FIELDS:
        meta.pop(key, None)
    # Not a re-validation of the stored spec: the live job may have changed since the revision was
    # stored (replicas, framework, containers), and a new job is created from it, so the revision is
    # checked against the manifest it is about to become.
    result = validate_policy(revision.spec, JobContext.from_manifest(manifest))
    if result.spec is None:
        raise RecreateFailed(
            f"Revision {revision.number} is not valid for this job any more; nothing was changed."
        )
    return desired_state(manifest, result.spec, revision.number).manifest


def job_recreate(*, job: TrainingJob, revision: PolicyRevision, actor: Actor) -> Recreated:
    incident = recovery_in_progress(job)
    if incident is not None:
        raise RecoveryInProgress(
            f"Incident {incident.number} of this job is still open (MindCluster is recovering it); "
            "recreate it once the incident has closed."
        )
    ref = cluster_ref(job.cluster)
    try:
        live = kube.get_ascendjob(ref, job.namespace, job.name)
    except ClusterError as err:
        raise RecreateFailed(f"Could not read the job from the cluster: {err.message}") from err
    old_uid = str(live["metadata"].get("uid", ""))
    manifest = fresh_manifest(live, revision)
    TrainingJob.objects.filter(pk=job.pk).update(uid=RECREATING_UID)
    try:
        kube.delete_ascendjob(ref, job.namespace, job.name, old_uid)
        _wait_gone(ref, job, old_uid)
        created = _create(ref, job, manifest)
    except ClusterError as err:
        TrainingJob.objects.filter(pk=job.pk).update(uid=old_uid)
        with transaction.atomic():
            audit_record(
                actor=actor,
                action="job.recreate_failed",
                obj=job,
                before={"uid": old_uid},
                after={"manifest": manifest, "error": err.message},
            )
        raise RecreateFailed(
            f"Recreating the job failed ({err.message}); the manifest is in the audit log "
            "(job.recreate_failed)."
        ) from err
    new_uid = str(created["metadata"].get("uid", ""))
    with transaction.atomic():
        TrainingJob.objects.filter(pk=job.pk).update(uid=new_uid, deleted_at=None, phase="")
        audit_record(
            actor=actor,
            action="job.recreate",
            obj=job,
            before={"uid": old_uid},
            after={"uid": new_uid, "revision": revision.number},
        )
        event_record(
            job=job,
            kind=kinds.JOB_RECREATED,
            message=f"Recreated with policy revision {revision.number} (UID {old_uid} → {new_uid})",
            source="recreate",
            data={"old_uid": old_uid, "new_uid": new_uid, "revision": revision.number},
        )
    job.refresh_from_db()
    return Recreated(job=job, old_uid=old_uid, new_uid=new_uid, revision=revision.number)


def _wait_gone(ref: kube.ClusterRef, job: TrainingJob, old_uid: str) -> None:
    deadline = time.monotonic() + DELETE_WAIT_SECONDS
    while time.monotonic() < deadline:
        try:
            live = kube.get_ascendjob(ref, job.namespace, job.name)
        except ClusterError as err:
            if err.not_found:
                return
            raise
        if str(live["metadata"].get("uid", "")) != old_uid:
            raise ClusterError("another job with this name appeared meanwhile", permanent=True, status=409)
        time.sleep(0.1)
    raise ClusterError(f"the old job was not gone after {DELETE_WAIT_SECONDS:.0f} s", permanent=False)


def _create(ref: kube.ClusterRef, job: TrainingJob, manifest: dict[str, Any]) -> dict[str, Any]:
    last: ClusterError | None = None
    for attempt in range(3):  # the old job is gone: try hard not to leave the name empty
        try:
            return kube.create_ascendjob(ref, job.namespace, manifest)
        except ClusterError as err:
            last = err
            if err.permanent:
                break
            time.sleep(0.5 * (attempt + 1))
    assert last is not None
    raise last

"""Recreate an AscendJob so its creation-time keys take effect (design §4.6): what to create.

The request side (``apps.admission.recreate_ops``) records the manifest this module renders before
anything is deleted; a Celery task then deletes and creates it.

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
from typing import Any

from apps.core.errors import ApplicationError
from apps.events.models import Incident
from apps.jobs.models import TrainingJob
from apps.policies.desired import desired_state
from apps.policies.models import PolicyRevision
from apps.policies.spec import JobContext
from apps.policies.validation import validate_policy

# Set on the row while the old incarnation is being replaced, so the watcher's DELETED for the
# old UID (``job_mark_deleted`` matches by UID) does not close the job's history.
RECREATING_UID = "recreating"
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


def recovery_in_progress(job: TrainingJob) -> Incident | None:
    return Incident.objects.filter(job=job, closed_at__isnull=True).first()


def as_new_object(live: dict[str, Any]) -> dict[str, Any]:
    """The live job as a body for a create: server-set fields and status dropped."""
    manifest = copy.deepcopy(live)
    manifest.pop("status", None)
    meta = manifest.setdefault("metadata", {})
    for key in _SERVER_FIELDS:
        meta.pop(key, None)
    return manifest


def fresh_manifest(live: dict[str, Any], revision: PolicyRevision) -> dict[str, Any]:
    """The live job as a new object with ``revision`` merged."""
    manifest = as_new_object(live)
    # Not a re-validation of the stored spec: the live job may have changed since the revision was
    # stored (replicas, framework, containers), and a new job is created from it, so the revision is
    # checked against the manifest it is about to become.
    result = validate_policy(revision.spec, JobContext.from_manifest(manifest))
    if result.spec is None:
        raise RecreateFailed(
            f"Revision {revision.number} is not valid for this job any more; nothing was changed."
        )
    return desired_state(manifest, result.spec, revision.number).manifest

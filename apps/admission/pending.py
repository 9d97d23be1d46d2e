"""Pending admissions: recorded when the webhook answers, made history only when the job is seen.

The webhook stamps ``recovery.mindcluster.io/admission-uid: <request.uid>`` on the object with its
patch. The API server may still reject the create (the webhook runs before schema validation and the
AlreadyExists check: ``staging/src/k8s.io/apiserver/pkg/endpoints/handlers/create.go`` calls
``mutatingAdmission.Admit`` before ``r.Create``, and ``registry/generic/registry/store.go``'s
``Create`` runs ``rest.BeforeCreate`` then ``e.Storage.Create``, which returns AlreadyExists), or
drop an answer that came after ``timeoutSeconds``. So the webhook writes only a
:class:`PendingAdmission`; when the job watcher adopts an AscendJob that carries the stamp of a
pending admission for that very namespace/name, revision 1 (source ``admission``) is recorded on
the job's row (:func:`confirm_hook`). An admission never seen is marked expired by
:func:`pending_expire` (beat). No admission ever deletes, re-links or changes a job's row.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.admission.models import PendingAdmission
from apps.audit.actors import Actor
from apps.audit.services import audit_record
from apps.events import kinds
from apps.events.services import event_record
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.listing import listing_refresh
from apps.policies.models import PolicyRevision, PolicySync

log = logging.getLogger(__name__)

ANNOTATION_ADMISSION_UID = "recovery.mindcluster.io/admission-uid"
ACTOR = Actor.system("admission")
EVENT_SOURCE = "admission"


def admission_uid_of(manifest: dict[str, Any]) -> str:
    annotations = (manifest.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(ANNOTATION_ADMISSION_UID) if isinstance(annotations, dict) else None
    return value if isinstance(value, str) else ""


def confirm_hook(cluster: Cluster, manifest: dict[str, Any]) -> Callable[[TrainingJob], None] | None:
    """For the adopter (``apps.policies.adoption``): the confirmation of the pending admission this
    object's stamp names, or None. Runs in the adopter's transaction; the pending row is locked."""
    uid = admission_uid_of(manifest)
    if not uid:
        return None
    meta = manifest.get("metadata") or {}
    pending = (
        PendingAdmission.objects.select_for_update()
        .filter(
            uid=uid,
            cluster=cluster,
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            state=PendingAdmission.State.PENDING,
        )
        .first()
    )
    if pending is None:
        return None  # confirmed already (a relist), expired, or a stamp copied from another job
    return lambda job: _confirm(pending, job)


def _confirm(pending: PendingAdmission, job: TrainingJob) -> None:
    if pending.outcome == PendingAdmission.Outcome.ADMITTED and job.current_revision_id is None:
        _record_revision_1(pending, job)
    elif pending.outcome == PendingAdmission.Outcome.SKIPPED:
        event_record(
            job=job,
            kind=kinds.POLICY_ADMISSION_SKIPPED,
            message=(
                "Created without a recovery policy: the namespace default or preset is invalid for this job"
            ),
            source=EVENT_SOURCE,
            severity="warning",
            data={"warnings": pending.warnings},
        )
    PendingAdmission.objects.filter(pk=pending.pk).update(
        state=PendingAdmission.State.CONFIRMED, job=job, resolved_at=timezone.now()
    )


def _record_revision_1(pending: PendingAdmission, job: TrainingJob) -> None:
    """Revision 1 (source admission), its applied sync, the audit entry and the event."""
    revision = PolicyRevision.objects.create(
        job=job,
        number=1,
        spec=pending.spec,
        author_name=ACTOR.name,
        comment=pending.comment,
        source=PolicyRevision.Source.ADMISSION,
    )
    TrainingJob.objects.filter(pk=job.pk).update(current_revision=revision)
    job.current_revision = revision
    listing_refresh([job.pk])
    # The API server applied the webhook's patch (the stamp proves it): the sync is applied.
    PolicySync.objects.create(job=job, revision=revision, generation=1, state=PolicySync.State.APPLIED)
    audit_record(actor=ACTOR, action="policy.update", obj=job, after=revision.spec)
    event_record(
        job=job,
        kind=kinds.POLICY_ADMITTED,
        message=f"Policy revision 1 merged at creation ({', '.join(pending.sources)})",
        source=EVENT_SOURCE,
        severity="warning" if pending.warnings else "info",
        data={"revision": 1, "sources": pending.sources, "warnings": pending.warnings},
    )


def pending_expire(now: Any = None) -> int:
    """Pending admissions older than ``ADMISSION_PENDING_TTL_SECONDS``: expired (never history)."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.ADMISSION_PENDING_TTL_SECONDS)
    with transaction.atomic():
        return PendingAdmission.objects.filter(
            state=PendingAdmission.State.PENDING, created_at__lt=cutoff
        ).update(state=PendingAdmission.State.EXPIRED, resolved_at=now)

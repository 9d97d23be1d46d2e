"""Recording what each incarnation of a job was created with (see ``JobIncarnation``).

Three observers feed it, each idempotent: the ingester (the PodGroup when it first sees it, ClusterD's
Init snapshot when that is observable), the adoption of a job (its restart-budget keys), and the push
(the PodGroup as it was *before* our first write to it, in case the ingester has not seen it yet).
The first observation of a PodGroup wins: later ones, after our writes, would not be creation-time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from apps.cluster.timestamps import parse_k8s_time
from apps.jobs.models import JobIncarnation, TrainingJob
from mindcluster import keys as c

# The metadata keys a PodGroup is created with that say what the job runs with.
TRACKED_LABELS = (
    c.LABEL_FAULT_SCHEDULING,
    c.LABEL_POD_RESCHEDULING,
    c.LABEL_FAULT_RETRY_TIMES,
    c.LABEL_SUB_HEALTHY_STRATEGY,
    c.LABEL_PROCESS_RECOVER_ENABLE,
)
TRACKED_ANNOTATIONS = (
    c.ANNOTATION_RECOVER_STRATEGY,
    c.ANNOTATION_WAIT_RESCHEDULE_TIMEOUT,
    c.ANNOTATION_PLATFORM_STRATEGY,
    c.ANNOTATION_POLICY_REVISION,
)


def tracked_keys(obj: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The recovery labels/annotations of an AscendJob or PodGroup (absent keys left out)."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    return {
        "labels": {key: str(labels[key]) for key in TRACKED_LABELS if key in labels},
        "annotations": {key: str(annotations[key]) for key in TRACKED_ANNOTATIONS if key in annotations},
    }


def _time(value: Any) -> datetime | None:
    return parse_k8s_time(value)


def _row(job: TrainingJob, uid: str) -> JobIncarnation:
    """The locked row of ``(job, uid)``, created on first sight (concurrent observers converge)."""
    rows = JobIncarnation.objects.select_for_update()
    found = rows.filter(job=job, uid=uid).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            JobIncarnation.objects.create(job=job, uid=uid)
    except IntegrityError:
        pass
    return rows.get(job=job, uid=uid)


def incarnation_observe_job(job: TrainingJob, manifest: dict[str, Any]) -> None:
    """The AscendJob as first seen under this uid: its creation time and restart-budget keys."""
    meta = manifest.get("metadata") or {}
    uid = str(meta.get("uid") or "")
    if not uid:
        return
    with transaction.atomic():
        row = _row(job, uid)
        if row.job_keys:
            return
        backoff = ((manifest.get("spec") or {}).get("runPolicy") or {}).get("backoffLimit")
        labels = meta.get("labels") or {}
        row.job_keys = {
            "backoffLimit": backoff if isinstance(backoff, int) and not isinstance(backoff, bool) else None,
            c.LABEL_FAULT_RETRY_TIMES: labels.get(c.LABEL_FAULT_RETRY_TIMES),
            "annotations": tracked_keys(manifest)["annotations"],
        }
        row.job_created_at = _time(meta.get("creationTimestamp"))
        row.save(update_fields=["job_keys", "job_created_at", "updated_at"])


def podgroup_job_uid(job: TrainingJob, podgroup: dict[str, Any]) -> str:
    """The uid of the AscendJob that owns ``podgroup`` (owner reference, else the ``<job>-<uid>`` name)."""
    meta = podgroup.get("metadata") or {}
    for owner in meta.get("ownerReferences") or []:
        if owner.get("kind") == c.ASCENDJOB_KIND and owner.get("uid"):
            return str(owner["uid"])
    name = str(meta.get("name") or "")
    prefix = f"{job.name}-"
    return name[len(prefix) :] if name.startswith(prefix) else ""


def incarnation_observe_podgroup(job: TrainingJob, podgroup: dict[str, Any], seen_by: str) -> bool:
    """Record a PodGroup seen for the first time; True when this was its first sight.

    A PodGroup deleted and created again (same job uid, new PodGroup uid) starts a new Init
    snapshot in ClusterD (``DeleteJob``, fault_recover_service.go:806), so it replaces the old record.
    """
    meta = podgroup.get("metadata") or {}
    uid = podgroup_job_uid(job, podgroup)
    pg_uid = str(meta.get("uid") or "")
    if not uid or not pg_uid:
        return False
    with transaction.atomic():
        row = _row(job, uid)
        if row.podgroup_uid == pg_uid:
            return False
        row.podgroup_uid = pg_uid
        row.podgroup_created_at = _time(meta.get("creationTimestamp"))
        row.podgroup_keys = tracked_keys(podgroup)
        row.podgroup_seen_by = seen_by[:16]
        row.init_keys, row.init_at = {}, None
        row.save()
    return True


def incarnation_observe_init(job: TrainingJob, uid: str, keys: dict[str, Any], at: datetime | None) -> None:
    """ClusterD's Init snapshot of the job's recovery config (the most direct evidence there is)."""
    if not uid:
        uid = job.uid
    if not uid:
        return
    with transaction.atomic():
        row = _row(job, uid)
        if row.init_keys == keys and row.init_at is not None:
            return
        row.init_keys, row.init_at = dict(keys), at
        row.save(update_fields=["init_keys", "init_at", "updated_at"])

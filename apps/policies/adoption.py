"""Adoption: AscendJobs found in a cluster become TrainingJob rows, their recovery keys revision 1."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.audit.services import audit_record
from apps.cluster import client as kube
from apps.cluster.errors import ClusterError
from apps.core.numbers import is_ascii_digits
from apps.jobs.clusters import cluster_ref
from apps.jobs.incarnations import incarnation_observe_job
from apps.jobs.models import Cluster, JobIncarnation, TrainingJob
from apps.policies.spec import DEFAULT_RELEASE, FRAMEWORKS, JobContext
from apps.policies.validation import validate_policy
from mindcluster import keys as c

log = logging.getLogger(__name__)

# Registered by apps.admission (a layer above, which this module may not import): given a job's
# manifest, the confirmation of the pending admission whose stamp it carries, or None. The adopter
# calls it with the job's row; it records revision 1 from what the webhook answered.
AdmissionSeen = Callable[[Cluster, dict[str, Any]], Callable[[TrainingJob], None] | None]
admission_hooks: list[AdmissionSeen] = []


def release_of(manifest: dict[str, Any]) -> str:
    """The job's MindCluster release from our label/annotation convention, else the default."""
    meta = manifest.get("metadata") or {}
    raw = (meta.get("labels") or {}).get(c.LABEL_RELEASE) or (meta.get("annotations") or {}).get(
        c.ANNOTATION_RELEASE
    )
    if raw:
        result = validate_policy({"mindcluster_version": str(raw)})
        if result.spec is not None:
            return result.spec.mindcluster_version
    return DEFAULT_RELEASE


def observed_spec(manifest: dict[str, Any], release: str) -> tuple[dict[str, Any], list[str]]:
    """The policy the job's live labels and annotations express, and what had to be ignored.

    ClusterD silently drops names it does not know; we keep only what validates and say what we
    dropped, so revision 1 is exactly the behaviour the job has today.
    """
    meta = manifest.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    spec: dict[str, Any] = {"mindcluster_version": release}
    raw_strategies = annotations.get(c.ANNOTATION_RECOVER_STRATEGY)
    if raw_strategies:
        spec["strategies"] = [s for s in str(raw_strategies).split(",") if s]
    fault_scheduling = labels.get(c.LABEL_FAULT_SCHEDULING)
    spec["fault_scheduling"] = fault_scheduling if fault_scheduling in ("grace", "force") else "off"
    spec["pod_rescheduling"] = labels.get(c.LABEL_POD_RESCHEDULING) == "on"
    if labels.get(c.LABEL_FAULT_RETRY_TIMES):
        spec["fault_retry_times"] = _int_or_raw(labels[c.LABEL_FAULT_RETRY_TIMES])
    if labels.get(c.LABEL_SUB_HEALTHY_STRATEGY):
        spec["sub_healthy_strategy"] = labels[c.LABEL_SUB_HEALTHY_STRATEGY]
    if annotations.get(c.ANNOTATION_WAIT_RESCHEDULE_TIMEOUT):
        spec["wait_reschedule_timeout"] = _int_or_raw(annotations[c.ANNOTATION_WAIT_RESCHEDULE_TIMEOUT])
    if c.ANNOTATION_PLATFORM_STRATEGY in annotations and raw_strategies:
        spec["platform_mode"] = True
    backoff = ((manifest.get("spec") or {}).get("runPolicy") or {}).get("backoffLimit")
    if isinstance(backoff, int) and not isinstance(backoff, bool) and backoff > 0:
        spec["backoff_limit"] = backoff
    ignored: list[str] = []
    for _ in range(len(spec) + 1):
        result = validate_policy(spec, JobContext.from_manifest(manifest))
        if result.ok:
            break
        for issue in result.errors:
            top = issue.field.lstrip("/").split("/")[0]
            parts = issue.field.lstrip("/").split("/")
            if top == "strategies" and len(parts) > 1 and is_ascii_digits(parts[1]):
                index = int(parts[1])
                bad = spec["strategies"][index] if index < len(spec.get("strategies", [])) else None
                if bad is not None:
                    ignored.append(f"strategies: {bad!r} ({issue.code})")
                    spec["strategies"] = [s for i, s in enumerate(spec["strategies"]) if i != index]
                    break
            elif top in spec and top != "mindcluster_version":
                ignored.append(f"{top}: {spec.pop(top)!r} ({issue.code})")
                break
        else:
            break
    return spec, ignored


def _int_or_raw(value: Any) -> Any:
    try:
        return int(str(value))
    except ValueError:
        return value


def job_facts(manifest: dict[str, Any]) -> dict[str, Any]:
    context = JobContext.from_manifest(manifest)
    framework = context.framework if context.framework in FRAMEWORKS else "pytorch"
    return {
        "uid": str((manifest.get("metadata") or {}).get("uid", "")),
        "framework": framework,
        "replicas": {r.role: r.replicas for r in context.replicas},
        "npus_per_pod": context.proc_per_node,
        "mindcluster_version": release_of(manifest),
        "phase": _phase(manifest),
    }


def _phase(manifest: dict[str, Any]) -> str:
    conditions = ((manifest.get("status") or {}).get("conditions")) or []
    if conditions and isinstance(conditions[-1], dict):
        return str(conditions[-1].get("type", ""))[:32]
    return ""


def job_adopt(*, cluster: Cluster, manifest: dict[str, Any]) -> tuple[TrainingJob, bool]:
    """Create or refresh the row for a live AscendJob; a new one gets its observed policy as r1."""
    from apps.audit.actors import Actor
    from apps.policies.models import PolicyRevision
    from apps.policies.services import policy_revision_create

    adoption = Actor.system("adoption")
    meta = manifest.get("metadata") or {}
    facts = job_facts(manifest)
    with transaction.atomic():
        confirm = next((c for c in (hook(cluster, manifest) for hook in admission_hooks) if c), None)
        job = (
            TrainingJob.objects.select_for_update()
            .filter(
                cluster=cluster,
                namespace=meta.get("namespace", ""),
                name=meta.get("name", ""),
                deleted_at__isnull=True,
            )
            .first()
        )
        uid = str(meta.get("uid") or "")
        if confirm is not None and job is not None and job.uid and job.uid != uid:
            # Seen, not assumed: the API server stored a new object under this name with our
            # admission stamp, so the job this row followed is gone; its history stays with it.
            TrainingJob.objects.filter(pk=job.pk).update(deleted_at=timezone.now())
            job = None
        created = job is None
        if job is None:
            job = TrainingJob.objects.create(
                cluster=cluster,
                namespace=meta.get("namespace", ""),
                name=meta.get("name", ""),
                source=TrainingJob.Source.ADOPTED,
                **facts,
            )
            audit_record(actor=adoption, action="job.adopt", obj=job, after=facts)
        else:
            changed = {
                key: value for key, value in facts.items() if getattr(job, key) != value and value != ""
            }
            if changed:
                TrainingJob.objects.filter(pk=job.pk).update(**changed, updated_at=timezone.now())
                job.refresh_from_db()
        if confirm is not None:
            confirm(job)
        if uid and not JobIncarnation.objects.filter(job=job, uid=uid).exclude(job_keys={}).exists():
            incarnation_observe_job(job, manifest)
        if job.current_revision_id is None:
            spec, ignored = observed_spec(manifest, job.mindcluster_version)
            comment = "observed in the cluster" + (f"; ignored {', '.join(ignored)}" if ignored else "")
            policy_revision_create(
                job=job,
                spec=spec,
                actor=adoption,
                comment=comment,
                source=PolicyRevision.Source.OBSERVED,
                push=False,
            )
    return job, created


def job_mark_deleted(*, cluster: Cluster, namespace: str, name: str, uid: str = "") -> int:
    """The job left the cluster: keep its row and history, mark it deleted."""
    rows = TrainingJob.objects.filter(
        cluster=cluster, namespace=namespace, name=name, deleted_at__isnull=True
    )
    if uid:
        rows = rows.filter(uid__in=[uid, ""])
    return rows.update(deleted_at=timezone.now())


def jobs_mark_gone(*, cluster: Cluster, namespace: str | None, present: set[tuple[str, str]]) -> int:
    """A full listing of ``namespace`` (None: every namespace) came without these jobs: they left.

    A list after a lost watch (410) is the only news of a job deleted while the watch was gone. A job
    registered here and never seen in the cluster (no uid yet) cannot have left it: its manifest may
    be applied a moment after the list was taken.
    """
    live = TrainingJob.objects.filter(cluster=cluster, deleted_at__isnull=True).exclude(uid="")
    if namespace:
        live = live.filter(namespace=namespace)
    gone = [(job.namespace, job.name) for job in live.only("namespace", "name")]
    return sum(
        job_mark_deleted(cluster=cluster, namespace=ns, name=name)
        for ns, name in gone
        if (ns, name) not in present
    )


def job_adopt_converging(*, cluster: Cluster, manifest: dict[str, Any]) -> TrainingJob | None:
    """``job_adopt``, read back with its cluster; when another process created the same row at the
    same moment (a replaying ingester), theirs is read. None after three such collisions."""
    for _ in range(3):
        try:
            job, _created = job_adopt(cluster=cluster, manifest=manifest)
        except IntegrityError:
            continue
        return TrainingJob.objects.select_related("cluster").get(pk=job.pk)
    return None


def job_adopt_from_cluster(*, cluster: Cluster, namespace: str, name: str) -> TrainingJob | None:
    """Adopt AscendJob ``namespace/name`` as the cluster has it now (None: not there, or unreachable).

    For a report about a job not adopted yet (its Event or PodGroup came before the job's own
    watch event).
    """
    try:
        manifest = kube.get_ascendjob(cluster_ref(cluster), namespace, name)
    except ClusterError as exc:
        log.info("cluster %s: job %s/%s not adoptable: %s", cluster.name, namespace, name, exc)
        return None
    return job_adopt_converging(cluster=cluster, manifest=manifest)

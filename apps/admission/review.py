"""The mutating admission webhook's logic: an ``AdmissionReview`` in, an ``AdmissionReview`` out.

On CREATE of an AscendJob: namespace default, then the preset named by the job's
``recovery.mindcluster.io/preset`` annotation, then the job's own keys (they win), rendered with the
same ``desired_state`` as the push (so the same revision annotation); the job is recorded
with that policy as revision 1 (source ``admission``). It never denies: whatever goes wrong, the job
is allowed unchanged, with a warning in the response and, where there is a job to attach it to, an
event. It is idempotent: a re-sent review for a job already recorded at admission (no UID yet)
gives the same patch from the stored revision (and a review re-sent before the first one's record
landed computes the same patch; the live-job unique constraint keeps one row).

With ``ADMISSION_RECORD_ASYNC`` the answer is sent before the job is recorded (about ten writes, on a
small thread pool right after), so the API server waits only for two reads and the merge.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from apps.admission.jsonpatch import diff
from apps.admission.merge import ANNOTATION_PRESET, Merged, keep_user_metadata, merge_layers
from apps.admission.models import NamespaceDefault
from apps.admission.review_shape import review_shape_problem
from apps.audit.actors import Actor
from apps.audit.services import audit_record
from apps.events import kinds
from apps.events.services import event_record
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.adoption import job_facts
from apps.policies.desired import desired_state
from apps.policies.models import PolicyRevision, PolicySync
from apps.policies.preset_services import preset_spec_resolve
from apps.policies.spec import JobContext, PolicySpec
from apps.policies.validation import validate_policy
from mindcluster import keys as c

log = logging.getLogger(__name__)

REVIEW_API_VERSION = "admission.k8s.io/v1"
ACTOR = Actor.system("admission")
EVENT_SOURCE = "admission"


class BadReview(ValueError):
    """Not an ``AdmissionReview`` request: answered 400, and the apiserver's failurePolicy decides."""


@dataclass
class Decision:
    patch: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    job: TrainingJob | None = None
    revision: int | None = None


def parse_review(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadReview("the body must be a JSON object (an AdmissionReview)")
    if body.get("apiVersion") != REVIEW_API_VERSION or body.get("kind") != "AdmissionReview":
        raise BadReview(f"expected apiVersion {REVIEW_API_VERSION}, kind AdmissionReview")
    request = body.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str) or not request["uid"]:
        raise BadReview("request.uid is required")
    problem = review_shape_problem(body, request)
    if problem:
        raise BadReview(problem)
    return request


def response_for(request: dict[str, Any], decision: Decision) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    if decision.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(decision.patch).encode()).decode()
    if decision.warnings:
        # The apiserver caps warnings; keep each short and few.
        response["warnings"] = [w[:250] for w in decision.warnings[:10]]
    return {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "response": response}


def _is_ascendjob_create(request: dict[str, Any]) -> bool:
    kind = request.get("kind") or {}
    return (
        request.get("operation") == "CREATE"
        and kind.get("group") == c.ASCENDJOB_GROUP
        and kind.get("kind") == c.ASCENDJOB_KIND
        and isinstance(request.get("object"), dict)
    )


_CLUSTER_TTL = 30.0
_clusters: dict[str, tuple[float, Cluster | None]] = {}


def resolve_cluster(name: str | None) -> Cluster | None:
    """``?cluster=<name>`` on the webhook URL; without it the default cluster (or the only one).

    Cached for 30 s per process: clusters change rarely, and every review would otherwise pay a query.
    """
    key = name or ""
    hit = _clusters.get(key)
    now = time.monotonic()
    if hit is not None and hit[0] > now:
        return hit[1]
    found = _lookup_cluster(name)
    _clusters[key] = (now + _CLUSTER_TTL, found)
    return found


def _forget_clusters(**_: Any) -> None:
    _clusters.clear()


# A cluster added, changed or removed in this process is seen at once; other processes within 30 s.
post_save.connect(_forget_clusters, sender=Cluster, dispatch_uid="admission-forget-clusters-save")
post_delete.connect(_forget_clusters, sender=Cluster, dispatch_uid="admission-forget-clusters-delete")


def _lookup_cluster(name: str | None) -> Cluster | None:
    if name:
        return Cluster.objects.filter(name=name).first()
    found = Cluster.objects.filter(is_default=True).first()
    if found is None:
        only = list(Cluster.objects.all()[:2])
        found = only[0] if len(only) == 1 else None
    return found


def _render_patch(
    obj: dict[str, Any], spec: PolicySpec, revision: int
) -> tuple[list[dict[str, Any]], list[str]]:
    # Stamped with the revision like a push, so "in effect" can match this job to its revision.
    rendered = desired_state(obj, spec, revision).manifest
    notes = keep_user_metadata(obj, rendered)
    return diff(obj, rendered), notes


def admit(request: dict[str, Any], cluster_name: str | None = None) -> Decision:
    """Decide one review; never raises for a well-formed review (errors become warnings)."""
    if not _is_ascendjob_create(request):
        return Decision()
    obj: dict[str, Any] = request["object"]
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if c.ANNOTATION_POLICY_REVISION in annotations:
        # Rendered by the control plane already (recreate, or a pipeline's manifest from a live job).
        return Decision(
            warnings=[f"already carries policy revision {annotations[c.ANNOTATION_POLICY_REVISION]}"]
        )
    cluster = resolve_cluster(cluster_name)
    if cluster is None:
        return Decision(
            warnings=["recovery policy: no cluster is registered for this webhook; job left unchanged"]
        )
    namespace = str(request.get("namespace") or meta.get("namespace") or "")
    name = str(meta.get("name") or "")
    try:
        return _admit(cluster, namespace, name, obj, dry_run=bool(request.get("dryRun")))
    except Exception as exc:  # never deny a job because of us
        log.exception("admission of %s/%s failed; allowing it unchanged", namespace, name)
        return Decision(warnings=[f"recovery policy not applied: internal error ({type(exc).__name__})"])


def _admit(cluster: Cluster, namespace: str, name: str, obj: dict[str, Any], *, dry_run: bool) -> Decision:
    if not name:
        # generateName: the apiserver has not chosen the name yet, so there is nothing to record.
        return Decision(
            warnings=["recovery policy: jobs created with generateName get no policy at admission"]
        )
    existing = (
        TrainingJob.objects.select_related("current_revision")
        .filter(cluster=cluster, namespace=namespace, name=name, deleted_at__isnull=True)
        .first()
    )
    if (
        existing is not None
        and not existing.uid
        and existing.current_revision is not None
        and existing.current_revision.source == PolicyRevision.Source.ADMISSION
    ):
        return _replay(existing, obj)  # a re-sent review: the same patch
    default = (
        NamespaceDefault.objects.select_related("current_revision")
        .filter(cluster=cluster, namespace=namespace)
        .first()
    )
    default_rev = default.current_revision if default is not None else None
    preset_name = str((obj.get("metadata") or {}).get("annotations", {}).get(ANNOTATION_PRESET) or "")
    warnings: list[str] = []
    preset: tuple[str, dict[str, Any]] | None = None
    if preset_name:
        # The job's own namespace first, then the global presets: never another namespace's.
        found = preset_spec_resolve(preset_name, cluster=cluster, namespace=namespace)
        if found is None:
            warnings.append(f"{ANNOTATION_PRESET}: no preset named {preset_name!r}; ignored")
        else:
            preset = (preset_name, found)
    if (default_rev is None or default_rev.spec is None) and preset is None:
        return Decision(warnings=warnings)  # nothing to give; the watcher adopts it as observed
    merged = merge_layers(obj, default_rev.spec if default_rev is not None else None, preset)
    if default_rev is not None and default_rev.spec is not None:
        merged.sources.append(f"namespace default r{default_rev.number}")
    if preset is not None:
        merged.sources.append(f"preset {preset_name}")
    warnings.extend(merged.overridden)
    result = validate_policy(merged.spec, JobContext.from_manifest(obj))
    if not result.ok or result.spec is None:
        problems = "; ".join(f"{i.field or '/'}: {i.message}" for i in result.errors[:3])
        warnings.append(
            f"recovery policy not applied ({', '.join(merged.sources)} is invalid here): {problems}"
        )
        if not dry_run:
            record_later(_record_skipped, cluster, namespace, name, obj, existing, list(warnings))
        return Decision(warnings=warnings)
    warnings.extend(f"{i.field or '/'}: {i.message}" for i in result.warnings)
    patch, notes = _render_patch(obj, result.spec, 1)
    warnings.extend(notes)
    if dry_run:
        return Decision(patch=patch, warnings=warnings, revision=1)
    record_later(_record, cluster, namespace, obj, existing, result.spec, merged, list(warnings))
    return Decision(patch=patch, warnings=warnings, revision=1)


def _replay(job: TrainingJob, obj: dict[str, Any]) -> Decision:
    revision = job.current_revision
    assert revision is not None
    try:
        # Validated against this very object when it was recorded (validation happens at store time).
        spec = PolicySpec.from_stored(revision.spec)
    except (TypeError, KeyError, ValueError, AttributeError):
        return Decision(
            warnings=["recovery policy: the recorded revision cannot be read; job left unchanged"]
        )
    patch, notes = _render_patch(obj, spec, revision.number)
    return Decision(patch=patch, warnings=notes, job=job, revision=revision.number)


def _new_job(
    cluster: Cluster, namespace: str, obj: dict[str, Any], existing: TrainingJob | None
) -> TrainingJob:
    if existing is not None:
        # A row left from a job of the same name whose deletion the watcher has not seen yet: the
        # apiserver only admits a CREATE when the name is free, so that job is gone.
        TrainingJob.objects.filter(pk=existing.pk).update(deleted_at=timezone.now())
    facts = job_facts(obj)
    facts.pop("uid", None)
    return TrainingJob.objects.create(
        cluster=cluster,
        namespace=namespace,
        name=str(obj["metadata"]["name"]),
        source=TrainingJob.Source.ADOPTED,
        **facts,
    )


# Recording runs after the answer, off the API server's critical path (design §2: the control plane
# is never on it). Two threads per process keep up with far more than 50 CREATEs/s (the benchmark).
_recorder = ThreadPoolExecutor(max_workers=2, thread_name_prefix="admission-record")


def record_later(fn: Callable[..., Any], *args: Any) -> Future[None] | None:
    """Record now, or with ``ADMISSION_RECORD_ASYNC`` on the recorder thread after the answer.

    Synchronous is the default: the row exists before the API server stores the job, so the job
    watcher can never adopt it first (which would make revision 1 "observed", not "admission").
    """
    if not settings.ADMISSION_RECORD_ASYNC:
        fn(*args)
        return None
    return _recorder.submit(_recorded, fn, *args)


def _recorded(fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except IntegrityError:
        # A re-sent review raced the first one's record: the live-job unique constraint kept one row.
        log.info("admission record skipped: the job is already recorded")
    except Exception:
        # The job exists with its keys; the watcher adopts it (observed revision 1, same keys).
        log.exception("admission record failed; the watcher will adopt the job instead")
    finally:
        close_old_connections()


def _relaxed_commit() -> None:
    """Do not wait for the WAL flush on commit (PostgreSQL): this is on the job's creation path.

    Losing the last few admissions in a database crash only downgrades them: the keys are in the
    job itself, so the watcher adopts it with the same policy as an observed revision 1.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")


@transaction.atomic
def _record(
    cluster: Cluster,
    namespace: str,
    obj: dict[str, Any],
    existing: TrainingJob | None,
    spec: PolicySpec,
    merged: Merged,
    warnings: list[str],
) -> TrainingJob:
    """The job row, revision 1 (source admission), its applied sync, the audit entry and the event.

    Not ``policy_revision_create``: for a row created in this very transaction its lock, number
    lookup and re-validation are dead weight, and this runs on the API server's critical path.
    """
    _relaxed_commit()
    job = _new_job(cluster, namespace, obj, existing)
    comment = "merged at admission from " + ", ".join(merged.sources)
    if merged.overridden:
        comment += "; the job's own keys kept: " + ", ".join(w.split(":", 1)[0] for w in merged.overridden)
    revision = PolicyRevision.objects.create(
        job=job,
        number=1,
        spec=spec.to_dict(),
        author_name=ACTOR.name,
        comment=comment[:500],
        source=PolicyRevision.Source.ADMISSION,
    )
    TrainingJob.objects.filter(pk=job.pk).update(current_revision=revision)
    job.current_revision = revision
    # The webhook's patch is the write: the sync is recorded as applied, like an observed revision.
    PolicySync.objects.create(job=job, revision=revision, generation=1, state=PolicySync.State.APPLIED)
    audit_record(actor=ACTOR, action="policy.update", obj=job, after=revision.spec)
    event_record(
        job=job,
        kind=kinds.POLICY_ADMITTED,
        message=f"Policy revision {revision.number} merged at creation ({', '.join(merged.sources)})",
        source=EVENT_SOURCE,
        severity="warning" if warnings else "info",
        data={"revision": revision.number, "sources": merged.sources, "warnings": warnings},
    )
    return job


@transaction.atomic
def _record_skipped(
    cluster: Cluster,
    namespace: str,
    name: str,
    obj: dict[str, Any],
    existing: TrainingJob | None,
    warnings: list[str],
) -> None:
    job = (
        existing if existing is not None and not existing.uid else _new_job(cluster, namespace, obj, existing)
    )
    event_record(
        job=job,
        kind=kinds.POLICY_ADMISSION_SKIPPED,
        message="Created without a recovery policy: the namespace default or preset is invalid for this job",
        source=EVENT_SOURCE,
        severity="warning",
        data={"warnings": warnings},
    )

"""The mutating admission webhook's logic: an ``AdmissionReview`` in, an ``AdmissionReview`` out.

On CREATE of an AscendJob: namespace default, then the preset named by the job's
``recovery.mindcluster.io/preset`` annotation, then the job's own keys (they win), rendered with the
same ``desired_state`` as the push (so the same revision annotation), plus the request's uid stamped
as ``recovery.mindcluster.io/admission-uid``. What was answered is a :class:`PendingAdmission`, not
history: the API server may still reject the create, or drop a late answer. Revision 1 (source
``admission``) is recorded when the job watcher sees the object created with the stamp
(``apps/admission/pending.py``). Nothing here reads, deletes or re-links a job's row, so a review,
forged or real, for a name that exists changes nothing. Dry-run requests record nothing
(``sideEffects: NoneOnDryRun``).

It never denies: whatever goes wrong, the job is allowed unchanged, with a warning in the response.
It is idempotent: a re-sent review (the same uid) gets the same patch from the pending admission.

With ``ADMISSION_RECORD_ASYNC`` the answer is sent before the pending row is written (one insert, on a
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
from django.db import close_old_connections
from django.db.models.signals import post_delete, post_save

from apps.admission.jsonpatch import diff
from apps.admission.merge import ANNOTATION_PRESET, Merged, keep_user_metadata, merge_layers
from apps.admission.models import NamespaceDefault, PendingAdmission
from apps.admission.pending import ANNOTATION_ADMISSION_UID
from apps.admission.review_shape import review_shape_problem
from apps.jobs.models import Cluster
from apps.policies.desired import desired_state
from apps.policies.preset_services import preset_spec_resolve
from apps.policies.spec import JobContext, PolicySpec
from apps.policies.validation import validate_policy
from mindcluster import keys as c

log = logging.getLogger(__name__)

REVIEW_API_VERSION = "admission.k8s.io/v1"
MAX_UID_LENGTH = 128  # the API server sends a UUID; the pending row's key column holds 128


class BadReview(ValueError):
    """Not an ``AdmissionReview`` request: answered 400, and the apiserver's failurePolicy decides."""


@dataclass
class Decision:
    patch: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    revision: int | None = None


def parse_review(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadReview("the body must be a JSON object (an AdmissionReview)")
    if body.get("apiVersion") != REVIEW_API_VERSION or body.get("kind") != "AdmissionReview":
        raise BadReview(f"expected apiVersion {REVIEW_API_VERSION}, kind AdmissionReview")
    request = body.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str) or not request["uid"]:
        raise BadReview("request.uid is required")
    if len(request["uid"]) > MAX_UID_LENGTH:
        raise BadReview(f"request.uid is longer than {MAX_UID_LENGTH} characters")
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


def _stamped(manifest: dict[str, Any], uid: str | None) -> dict[str, Any]:
    """``manifest`` with the review's uid as an annotation (None: unchanged), so the watcher can tell
    the object the API server stored with this answer from any other of the same name."""
    if uid is None:
        return manifest
    meta = dict(manifest.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION_ADMISSION_UID: uid}
    return {**manifest, "metadata": meta}


def _render_patch(
    obj: dict[str, Any], spec: PolicySpec, revision: int, stamp: str | None
) -> tuple[list[dict[str, Any]], list[str]]:
    # Stamped with the revision like a push, so "in effect" can match this job to its revision.
    rendered = desired_state(obj, spec, revision).manifest
    notes = keep_user_metadata(obj, rendered)
    return diff(obj, _stamped(rendered, stamp)), notes


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
        return _admit(
            cluster, namespace, name, obj, uid=str(request["uid"]), dry_run=bool(request.get("dryRun"))
        )
    except Exception as exc:  # never deny a job because of us
        log.exception("admission of %s/%s failed; allowing it unchanged", namespace, name)
        return Decision(warnings=[f"recovery policy not applied: internal error ({type(exc).__name__})"])


def _admit(
    cluster: Cluster, namespace: str, name: str, obj: dict[str, Any], *, uid: str, dry_run: bool
) -> Decision:
    if not name:
        # generateName: the apiserver has not chosen the name yet, so there is nothing to record.
        return Decision(
            warnings=["recovery policy: jobs created with generateName get no policy at admission"]
        )
    # Dry run: the same answer, no stamp (nothing is pending) and nothing written.
    stamp = None if dry_run else uid
    resent = None if dry_run else PendingAdmission.objects.filter(uid=uid).first()
    if resent is not None:
        return _replay(resent, obj)
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
    pending = PendingAdmission(
        uid=uid, cluster=cluster, namespace=namespace, name=name, sources=merged.sources
    )
    result = validate_policy(merged.spec, JobContext.from_manifest(obj))
    if not result.ok or result.spec is None:
        problems = "; ".join(f"{i.field or '/'}: {i.message}" for i in result.errors[:3])
        warnings.append(
            f"recovery policy not applied ({', '.join(merged.sources)} is invalid here): {problems}"
        )
        if stamp is None:
            return Decision(warnings=warnings)
        pending.outcome, pending.warnings = PendingAdmission.Outcome.SKIPPED, list(warnings)
        record_later(_save_pending, pending)
        return Decision(patch=diff(obj, _stamped(obj, stamp)), warnings=warnings)
    warnings.extend(f"{i.field or '/'}: {i.message}" for i in result.warnings)
    patch, notes = _render_patch(obj, result.spec, 1, stamp)
    warnings.extend(notes)
    if stamp is not None:
        pending.outcome, pending.spec = PendingAdmission.Outcome.ADMITTED, result.spec.to_dict()
        pending.comment, pending.warnings = _comment(merged), list(warnings)
        record_later(_save_pending, pending)
    return Decision(patch=patch, warnings=warnings, revision=1)


def _comment(merged: Merged) -> str:
    comment = "merged at admission from " + ", ".join(merged.sources)
    if merged.overridden:
        comment += "; the job's own keys kept: " + ", ".join(w.split(":", 1)[0] for w in merged.overridden)
    return comment[:500]


def _replay(pending: PendingAdmission, obj: dict[str, Any]) -> Decision:
    """The answer to a re-sent review: the same patch, from what the first answer recorded."""
    if pending.outcome == PendingAdmission.Outcome.SKIPPED or pending.spec is None:
        return Decision(patch=diff(obj, _stamped(obj, pending.uid)), warnings=list(pending.warnings))
    try:
        # Validated against this very object when it was recorded.
        spec = PolicySpec.from_stored(pending.spec)
    except (TypeError, KeyError, ValueError, AttributeError):
        return Decision(
            warnings=["recovery policy: the recorded admission cannot be read; job left unchanged"]
        )
    patch, notes = _render_patch(obj, spec, 1, pending.uid)
    return Decision(patch=patch, warnings=[*pending.warnings, *notes][:10], revision=1)


# Recording runs after the answer, off the API server's critical path (design §2: the control plane
# is never on it). Two threads per process keep up with far more than 50 CREATEs/s (the benchmark).
_recorder = ThreadPoolExecutor(max_workers=2, thread_name_prefix="admission-record")


def record_later(fn: Callable[..., Any], *args: Any) -> Future[None] | None:
    """Record now, or with ``ADMISSION_RECORD_ASYNC`` on the recorder thread after the answer.

    Synchronous is the default: the pending row exists before the API server stores the job, so the
    job watcher always finds it (else the job is adopted with an observed revision 1, same keys).
    """
    if not settings.ADMISSION_RECORD_ASYNC:
        fn(*args)
        return None
    return _recorder.submit(_recorded, fn, *args)


def _recorded(fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        # The job exists with its keys; the watcher adopts it (observed revision 1, same keys).
        log.exception("admission record failed; the watcher will adopt the job instead")
    finally:
        close_old_connections()


def _save_pending(pending: PendingAdmission) -> None:
    # One INSERT ... ON CONFLICT DO NOTHING in autocommit: a re-sent review that raced the first one's
    # insert leaves the first one standing (the uid is unique), and no BEGIN/COMMIT round trips are
    # spent on the API server's critical path (three statements a review instead of five).
    PendingAdmission.objects.bulk_create([pending], ignore_conflicts=True)

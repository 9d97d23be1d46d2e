"""Putting a policy revision into the cluster: claim the outbox row, render, write, record.

Idempotent on (job, revision): every object we write carries the revision number in the
``recovery.mindcluster.io/policy-revision`` annotation, and an object that already has the
desired content is not written again, so a redelivered task or a sweep re-queue is harmless.
Only policy-owned keys are written (merge patches of the difference); every write carries a
``resourceVersion`` precondition, and a 409 means "re-read and try again".
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.cluster import client as kube
from apps.cluster.errors import ClusterError
from apps.core.jsonmerge import merge_patch_diff
from apps.events.services import event_record
from apps.jobs.clusters import cluster_ref
from apps.jobs.incarnations import incarnation_observe_podgroup
from apps.jobs.models import TrainingJob
from apps.policies.models import PolicyRevision, PolicySync
from apps.policies.rendering import RenderResult, render
from apps.policies.spec import PolicySpec
from apps.policies.validation import validate_policy
from mindcluster import keys as c

log = logging.getLogger(__name__)
State = PolicySync.State
# Called with a stage name ("claimed", "pushed:ascendjob", ...) as a push passes it. Production passes
# nothing; a test passes a callable that blocks, to interleave two pushes deterministically.
Checkpoint = Callable[[str], None]


def _no_checkpoint(stage: str) -> None:
    return None


def spec_of(revision: PolicyRevision) -> PolicySpec:
    result = validate_policy(revision.spec)
    if result.spec is None:  # stored revisions were validated on save; this guards hand edits in the DB
        raise ClusterError(
            f"revision {revision.number} no longer validates: {result.errors[0].message}", permanent=True
        )
    return result.spec


# --- outbox ------------------------------------------------------------------------------------------
def sync_create(*, revision: PolicyRevision) -> PolicySync:
    """Create the outbox row for a new revision and queue its push after commit."""
    sync = PolicySync.objects.create(job=revision.job, revision=revision, generation=revision.number)
    transaction.on_commit(lambda: enqueue_push(sync.pk))
    return sync


def enqueue_push(sync_id: int) -> None:
    from apps.policies.tasks import push_policy as push_policy_task

    try:
        push_policy_task.apply_async(kwargs={"sync_id": sync_id}, queue=settings.CELERY_PUSH_QUEUE)
    except Exception:  # broker down: the row stays pending and the sweep re-queues it
        log.warning("could not queue push of sync %s; the sweep will retry", sync_id, exc_info=True)


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


def _claim(sync_id: int, token: str) -> PolicySync | None:
    """Take the row for this task; a redelivery of the same task (same id) may take it back."""
    now = timezone.now()
    lease = now + timedelta(seconds=settings.PUSH_LEASE_SECONDS)
    claimable = (
        Q(state=State.PENDING)
        | Q(state=State.APPLYING, lease_expires_at__lt=now)
        | Q(state=State.APPLYING, claim_token=token)
    )
    updated = PolicySync.objects.filter(claimable, pk=sync_id).update(
        state=State.APPLYING, claim_token=token, lease_expires_at=lease, started_at=now
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
    deadline: float
    versions: dict[str, str] = field(default_factory=dict)
    writes: int = 0

    def failed_attempt(self, exc: ClusterError) -> None:
        self.sync.attempts += 1
        self.sync.last_error = explain(exc)
        # Extend the lease while we keep trying, so the sweep does not start a second pusher.
        PolicySync.objects.filter(pk=self.sync.pk).update(
            attempts=self.sync.attempts,
            last_error=self.sync.last_error,
            lease_expires_at=timezone.now() + timedelta(seconds=settings.PUSH_LEASE_SECONDS),
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


def push_sync(*, sync_id: int, token: str, checkpoint: Checkpoint = _no_checkpoint) -> PolicySync | None:
    """Claim and push one outbox row; returns the row in its final state, or None if not ours."""
    sync = _claim(sync_id, token)
    if sync is None:
        return None
    if _superseded(sync):
        PolicySync.objects.filter(pk=sync.pk).update(state=State.SUPERSEDED, finished_at=timezone.now())
        return PolicySync.objects.get(pk=sync.pk)
    checkpoint("claimed")
    progress = _Progress(sync=sync, deadline=time.monotonic() + settings.PUSH_RETRY_BUDGET_SECONDS)
    try:
        spec = spec_of(sync.revision)
        ref = cluster_ref(sync.job.cluster)
        rendered = _with_retries(progress, lambda: _push_ascendjob(progress, ref, spec))
        checkpoint("pushed:ascendjob")
        _with_retries(progress, lambda: _push_podgroup(progress, ref, rendered))
        checkpoint("pushed:podgroup")
        _with_retries(progress, lambda: _push_configmap(progress, ref, rendered))
    except ClusterError as exc:
        return _finish_failed(sync, exc)
    except _Superseded:
        PolicySync.objects.filter(pk=sync.pk).update(state=State.SUPERSEDED, finished_at=timezone.now())
        return PolicySync.objects.get(pk=sync.pk)
    return _finish_applied(progress, rendered)


class _Superseded(Exception):
    pass


def _with_retries(progress: _Progress, step: Any) -> Any:
    attempt = 0
    while True:
        try:
            return step()
        except ClusterError as exc:
            progress.failed_attempt(exc)
            if exc.permanent:
                raise
            attempt += 1
            if _superseded(progress.sync):
                raise _Superseded from exc
            if exc.conflict and attempt <= settings.PUSH_MAX_CONFLICTS:
                continue  # re-read at once: somebody else wrote in between
            delay = exc.retry_after if exc.retry_after is not None else _backoff(attempt)
            if time.monotonic() + delay > progress.deadline:
                raise ClusterError(
                    f"gave up after {progress.sync.attempts} attempts: {explain(exc)}",
                    permanent=False,
                    status=exc.status,
                ) from exc
            time.sleep(delay)


def _backoff(attempt: int) -> float:
    """Exponential backoff with full jitter, capped so recovery is noticed within seconds."""
    cap = min(settings.PUSH_BACKOFF_MAX_SECONDS, settings.PUSH_BACKOFF_BASE_SECONDS * (2 ** min(attempt, 10)))
    return random.uniform(cap / 2, cap)


def _revision_value(sync: PolicySync) -> str:
    return str(sync.generation)


def _refuse_newer(progress: _Progress, live: dict[str, Any]) -> None:
    """Never write over a newer revision: the DB check in ``push_sync`` ran before this read.

    Revision N may pass that check, then read the object after N+1 wrote it; without this it
    would patch N over N+1 (the ``resourceVersion`` precondition only catches writes *between*
    our read and our write, and those end here on the re-read). An annotation naming a revision
    this job never had (an object left over from another control plane) is not "newer".
    """
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    value = str(annotations.get(c.ANNOTATION_POLICY_REVISION) or "")
    if not value.isdigit() or int(value) <= progress.sync.generation:
        return
    if PolicySync.objects.filter(job_id=progress.sync.job_id, generation=int(value)).exists():
        raise _Superseded


def _push_ascendjob(progress: _Progress, ref: kube.ClusterRef, spec: PolicySpec) -> RenderResult:
    job = progress.sync.job
    live = kube.get_ascendjob(ref, job.namespace, job.name)
    _refuse_newer(progress, live)
    live_uid = str((live.get("metadata") or {}).get("uid", ""))
    if live_uid and live_uid != job.uid:
        TrainingJob.objects.filter(pk=job.pk).update(uid=live_uid)
        job.uid = live_uid
    rendered = render(live, spec)
    desired = rendered.manifest
    desired.setdefault("metadata", {}).setdefault("annotations", {})[c.ANNOTATION_POLICY_REVISION] = (
        _revision_value(progress.sync)
    )
    patch = {
        "metadata": merge_patch_diff(
            _meta_subset(live),
            {
                "labels": desired["metadata"].get("labels") or {},
                "annotations": desired["metadata"].get("annotations") or {},
            },
        ),
        "spec": merge_patch_diff(live.get("spec") or {}, desired.get("spec") or {}),
    }
    patch = {key: value for key, value in patch.items() if value}
    if not patch:
        progress.versions["ascendjob"] = str(live["metadata"].get("resourceVersion", ""))
        return rendered
    patch.setdefault("metadata", {})["resourceVersion"] = live["metadata"]["resourceVersion"]
    result = kube.patch_ascendjob(ref, job.namespace, job.name, patch)
    progress.writes += 1
    progress.versions["ascendjob"] = str(result["metadata"].get("resourceVersion", ""))
    return rendered


def _meta_subset(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {"labels": dict(meta.get("labels") or {}), "annotations": dict(meta.get("annotations") or {})}


def podgroup_desired(rendered: RenderResult, generation: int) -> dict[str, dict[str, str | None]]:
    """Policy-owned PodGroup keys: value to set, or None to remove."""
    meta = rendered.podgroup_patch.get("metadata", {})
    labels = dict(meta.get("labels") or {})
    annotations = dict(meta.get("annotations") or {})
    annotations[c.ANNOTATION_POLICY_REVISION] = str(generation)
    return {"labels": labels, "annotations": annotations}


def same_value(section: str, key: str, live: dict[str, Any], desired: str | None) -> bool:
    # Platform mode is switched on by the *presence* of ProcessRecoverStrategy; on the PodGroup its
    # value belongs to the decider (the standing answer, or its answer during a fault) and must never
    # be reset by a push. The push writes the standing answer only where the key is missing.
    if section == "annotations" and key == c.ANNOTATION_PLATFORM_STRATEGY and desired is not None:
        return key in live
    return live.get(key) == desired


def key_differences(live_meta: dict[str, Any], desired: dict[str, dict[str, str | None]]) -> dict[str, Any]:
    """Merge patch of only the owned keys whose live value differs from the desired one."""
    patch: dict[str, Any] = {}
    for section in ("labels", "annotations"):
        live_section = live_meta.get(section) or {}
        changed = {
            key: value
            for key, value in desired[section].items()
            if not same_value(section, key, live_section, value)
        }
        if changed:
            patch[section] = changed
    return patch


def _push_podgroup(progress: _Progress, ref: kube.ClusterRef, rendered: RenderResult) -> None:
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
    patch = key_differences(live.get("metadata") or {}, podgroup_desired(rendered, progress.sync.generation))
    if not patch:
        progress.versions["podgroup"] = str(live["metadata"].get("resourceVersion", ""))
        return
    patch["resourceVersion"] = live["metadata"]["resourceVersion"]
    result = kube.patch_podgroup(ref, job.namespace, name, {"metadata": patch})
    progress.writes += 1
    progress.versions["podgroup"] = str(result["metadata"].get("resourceVersion", ""))


def _push_configmap(progress: _Progress, ref: kube.ClusterRef, rendered: RenderResult) -> None:
    job = progress.sync.job
    name = f"{c.TASKD_MANAGER_CONFIGMAP_PREFIX}{job.name}"
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
    desired = rendered.configmap
    if desired is None:
        if live is not None and (live.get("metadata", {}).get("labels") or {}).get(c.MANAGED_BY_LABEL) == (
            c.MANAGED_BY_VALUE
        ):
            kube.delete_configmap(ref, job.namespace, name, live["metadata"]["resourceVersion"])
            progress.writes += 1
        progress.versions["configmap"] = "none"
        return
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": job.namespace,
            "labels": dict(desired["metadata"].get("labels") or {}),
            "annotations": {c.ANNOTATION_POLICY_REVISION: str(progress.sync.generation)},
        },
        "data": dict(desired.get("data") or {}),
    }
    if live is None:
        result = kube.create_configmap(ref, job.namespace, body)
    else:
        live_meta = live.get("metadata") or {}
        same = (
            (live.get("data") or {}) == body["data"]
            and (live_meta.get("annotations") or {}).get(c.ANNOTATION_POLICY_REVISION)
            == str(progress.sync.generation)
            and all(
                (live_meta.get("labels") or {}).get(k) == v for k, v in body["metadata"]["labels"].items()
            )
        )
        if same:
            progress.versions["configmap"] = str(live_meta.get("resourceVersion", ""))
            return
        # Keep labels/annotations others put on it; replace only what we own.
        body["metadata"]["labels"] = {**(live_meta.get("labels") or {}), **body["metadata"]["labels"]}
        body["metadata"]["annotations"] = {
            **(live_meta.get("annotations") or {}),
            **body["metadata"]["annotations"],
        }
        body["metadata"]["resourceVersion"] = live_meta["resourceVersion"]
        result = kube.replace_configmap(ref, job.namespace, name, body)
    progress.writes += 1
    progress.versions["configmap"] = str(result["metadata"].get("resourceVersion", ""))


def _finish_applied(progress: _Progress, rendered: RenderResult) -> PolicySync:
    sync = progress.sync
    effects = [{"target": e.target, "when": e.when, "summary": e.summary} for e in rendered.effects]
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
    event_record(
        job=sync.job,
        kind="policy.failed",
        source="push",
        severity="error",
        message=f"policy revision {sync.generation} failed: {message}"[:500],
        data={"revision": sync.generation, "status": exc.status, "retryable": not exc.permanent},
    )

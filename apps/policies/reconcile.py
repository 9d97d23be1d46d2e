"""Periodic safety nets: re-queue lost pushes, and compare live objects with the current revision."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connections
from django.db.models import Q
from django.utils import timezone

from apps.cluster import client as kube
from apps.cluster import constants as c
from apps.cluster.errors import ClusterError
from apps.events.services import event_record
from apps.jobs.clusters import cluster_ref
from apps.policies.models import PolicySync
from apps.policies.push import enqueue_push, podgroup_desired, same_value, spec_of
from apps.policies.rendering import render

log = logging.getLogger(__name__)
State = PolicySync.State


def sweep_stuck_syncs() -> list[int]:
    """Re-queue rows a lost message or a dead worker left behind; return their ids."""
    now = timezone.now()
    stale_pending = now - timedelta(seconds=settings.PUSH_PENDING_GRACE_SECONDS)
    retry_failed = now - timedelta(seconds=settings.PUSH_FAILED_RETRY_SECONDS)
    rows = PolicySync.objects.filter(
        Q(state=State.PENDING, queued_at__lt=stale_pending)
        | Q(state=State.PENDING, started_at__lt=stale_pending)
        | Q(state=State.APPLYING, lease_expires_at__lt=now)
        # A cluster that was unreachable: try again by itself when it may be back.
        | Q(state=State.FAILED, retryable=True, finished_at__lt=retry_failed)
    ).values_list("pk", "state", "job_id", "generation")
    requeued: list[int] = []
    for pk, state, job_id, generation in rows:
        newer = PolicySync.objects.filter(job_id=job_id, generation__gt=generation).exists()
        if newer:
            PolicySync.objects.filter(pk=pk).update(state=State.SUPERSEDED, finished_at=now)
            continue
        if state == State.FAILED:
            PolicySync.objects.filter(pk=pk, state=State.FAILED).update(state=State.PENDING, claim_token="")
        elif state == State.APPLYING:
            PolicySync.objects.filter(pk=pk, state=State.APPLYING, lease_expires_at__lt=now).update(
                state=State.PENDING, claim_token=""
            )
        enqueue_push(pk)
        requeued.append(pk)
    return requeued


@dataclass(frozen=True)
class Drift:
    """One policy-owned key whose live value differs from the current revision."""

    object: str
    key: str
    live: Any
    desired: Any

    def as_dict(self) -> dict[str, Any]:
        return {"object": self.object, "key": self.key, "live": self.live, "desired": self.desired}


def drift_of(sync: PolicySync) -> list[Drift]:
    """Compare the live AscendJob and PodGroup with what the sync's revision renders."""
    job = sync.job
    ref = cluster_ref(job.cluster)
    spec = spec_of(sync.revision)
    live_job = kube.get_ascendjob(ref, job.namespace, job.name)
    rendered = render(live_job, spec)
    found: list[Drift] = []
    live_meta = live_job.get("metadata") or {}
    for section, desired_values, removed in (
        ("labels", rendered.labels, rendered.removed_labels),
        ("annotations", rendered.annotations, rendered.removed_annotations),
    ):
        live_values = live_meta.get(section) or {}
        wanted: dict[str, str | None] = {**dict(desired_values), **{key: None for key in removed}}
        for key, value in sorted(wanted.items()):
            if live_values.get(key) != value:
                found.append(Drift("AscendJob", f"metadata.{section}.{key}", live_values.get(key), value))
    if (live_job.get("spec") or {}) != (rendered.manifest.get("spec") or {}):
        found.append(Drift("AscendJob", "spec.replicaSpecs (env, ports, volumes)", "differs", "rendered"))
    uid = str(live_meta.get("uid", ""))
    try:
        podgroup = kube.get_podgroup(ref, job.namespace, kube.podgroup_name(job.name, uid))
    except ClusterError as exc:
        if not exc.not_found:
            raise
        return found
    pg_meta = podgroup.get("metadata") or {}
    desired = podgroup_desired(rendered, sync.generation)
    for section in ("labels", "annotations"):
        live_values = pg_meta.get(section) or {}
        for key, value in sorted(desired[section].items()):
            if key == c.ANNOTATION_POLICY_REVISION:
                continue  # bookkeeping, not behaviour
            if not same_value(section, key, live_values, value):
                found.append(Drift("PodGroup", f"metadata.{section}.{key}", live_values.get(key), value))
    return found


def reconcile_job_sync(sync: PolicySync) -> PolicySync:
    """Check one applied/drifted row; mark drift (with the keys), heal when the cluster says so."""
    try:
        drift = drift_of(sync)
    except ClusterError as exc:
        log.info("drift check of %s skipped: %s", sync, exc.message)
        return sync
    now = timezone.now()
    if not drift:
        if sync.state == State.DRIFTED:
            PolicySync.objects.filter(pk=sync.pk).update(state=State.APPLIED, drift=[], checked_at=now)
            event_record(
                job=sync.job,
                kind="policy.drift_resolved",
                source="reconcile",
                message=f"live objects match policy revision {sync.generation} again",
            )
        else:
            PolicySync.objects.filter(pk=sync.pk).update(checked_at=now)
        sync.refresh_from_db()
        return sync
    keys = [d.as_dict() for d in drift]
    if sync.state != State.DRIFTED or sync.drift != keys:
        PolicySync.objects.filter(pk=sync.pk).update(state=State.DRIFTED, drift=keys, checked_at=now)
        event_record(
            job=sync.job,
            kind="policy.drifted",
            source="reconcile",
            severity="warning",
            message="live objects differ from policy revision "
            f"{sync.generation}: " + ", ".join(f"{d.object} {d.key}" for d in drift)[:400],
            data={"revision": sync.generation, "drift": keys},
        )
    if sync.job.cluster.auto_heal:
        PolicySync.objects.filter(pk=sync.pk, state=State.DRIFTED).update(state=State.PENDING, claim_token="")
        enqueue_push(sync.pk)
    sync.refresh_from_db()
    return sync


def reconcile_all(*, concurrency: int | None = None) -> int:
    """Drift-check the latest applied/drifted row of every live job; returns how many were checked.

    Reads from the cluster dominate, so jobs are checked by a small thread pool (each thread has
    its own database connection, closed when it is done).
    """
    latest = (
        PolicySync.objects.filter(job__deleted_at__isnull=True, state__in=[State.APPLIED, State.DRIFTED])
        .select_related("job__cluster", "revision")
        .order_by("job_id", "-generation")
        .distinct("job_id")
        if _supports_distinct_on()
        else None
    )
    rows = list(latest) if latest is not None else _latest_rows_portable()
    rows = [sync for sync in rows if sync.job.current_revision_id == sync.revision_id]
    workers = concurrency or settings.RECONCILE_CONCURRENCY
    if workers <= 1 or len(rows) < 2:
        for sync in rows:
            reconcile_job_sync(sync)
        return len(rows)

    def check(sync: PolicySync) -> None:
        try:
            reconcile_job_sync(sync)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="reconcile") as pool:
        list(pool.map(check, rows))
    return len(rows)


def _supports_distinct_on() -> bool:
    from django.db import connection

    return bool(connection.features.can_distinct_on_fields)


def _latest_rows_portable() -> list[PolicySync]:
    rows: dict[int, PolicySync] = {}
    for sync in PolicySync.objects.filter(
        job__deleted_at__isnull=True, state__in=[State.APPLIED, State.DRIFTED]
    ).select_related("job__cluster", "revision"):
        if sync.job_id not in rows or rows[sync.job_id].generation < sync.generation:
            rows[sync.job_id] = sync
    return list(rows.values())

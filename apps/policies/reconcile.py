"""Periodic safety nets: re-queue lost pushes, and compare live objects with the current revision.

I/O and bookkeeping only: what the revision wants and how it differs from the live objects comes
from ``desired`` (the same ``desired_state`` and comparisons the push writes with).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.cluster import client as kube
from apps.cluster.errors import ClusterError
from apps.events.services import event_record
from apps.jobs.clusters import cluster_ref
from apps.policies.desired import Drift, desired_state, drift
from apps.policies.models import PolicySync
from apps.policies.syncs import enqueue_push, spec_of

log = logging.getLogger(__name__)
State = PolicySync.State


def sweep_stuck_syncs() -> list[int]:
    """Re-queue rows a lost message or a dead worker left behind; return their ids.

    A re-queued pending row gets a lease (``lease_expires_at``, ``PUSH_LEASE_SECONDS``) and is not
    re-queued again before it expires: under a backlog the queue holds at most one extra message per
    row per lease, instead of one per row per sweep.
    """
    now = timezone.now()
    stale_pending = now - timedelta(seconds=settings.PUSH_PENDING_GRACE_SECONDS)
    retry_failed = now - timedelta(seconds=settings.PUSH_FAILED_RETRY_SECONDS)
    lease = now + timedelta(seconds=settings.PUSH_LEASE_SECONDS)
    unleased = Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now)
    rows = PolicySync.objects.filter(
        (Q(state=State.PENDING, queued_at__lt=stale_pending) & unleased)
        | (Q(state=State.PENDING, started_at__lt=stale_pending) & unleased)
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
            taken = PolicySync.objects.filter(pk=pk, state=State.FAILED)
        elif state == State.APPLYING:
            taken = PolicySync.objects.filter(pk=pk, state=State.APPLYING, lease_expires_at__lt=now)
        else:
            taken = PolicySync.objects.filter(pk=pk, state=State.PENDING).filter(unleased)
        # Conditional, so two sweeps running at once queue a row once.
        if not taken.update(state=State.PENDING, claim_token="", lease_expires_at=lease):
            continue
        enqueue_push(pk)
        requeued.append(pk)
    return requeued


@dataclass
class LiveObjects:
    """One listing of a cluster's AscendJobs and PodGroups, so a sweep costs a few LISTs, not 2 GETs a job."""

    jobs: dict[tuple[str, str], dict[str, Any]]
    podgroups: dict[tuple[str, str], dict[str, Any]]

    @classmethod
    def fetch(cls, sync: PolicySync) -> LiveObjects:
        ref = cluster_ref(sync.job.cluster)
        jobs, _ = kube.list_all_ascendjobs(ref)
        podgroups, _ = kube.list_all_podgroups(ref)
        return cls(
            jobs={(j["metadata"]["namespace"], j["metadata"]["name"]): j for j in jobs},
            podgroups={(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in podgroups},
        )


def drift_of(sync: PolicySync, live: LiveObjects | None = None) -> list[Drift]:
    """Compare the live AscendJob and PodGroup with the sync's revision (``desired.drift``)."""
    job = sync.job
    ref = cluster_ref(job.cluster)
    spec = spec_of(sync.revision)
    if live is None:
        live_job = kube.get_ascendjob(ref, job.namespace, job.name)
    else:
        found_job = live.jobs.get((job.namespace, job.name))
        if found_job is None:
            raise ClusterError(f"AscendJob {job.namespace}/{job.name} not found", permanent=True, status=404)
        live_job = found_job
    state = desired_state(live_job, spec, sync.generation)
    uid = str((live_job.get("metadata") or {}).get("uid", ""))
    pg_name = kube.podgroup_name(job.name, uid)
    podgroup: dict[str, Any] | None
    if live is None:
        try:
            podgroup = kube.get_podgroup(ref, job.namespace, pg_name)
        except ClusterError as exc:
            if not exc.not_found:
                raise
            podgroup = None
    else:
        podgroup = live.podgroups.get((job.namespace, pg_name))
    return drift(live_job, podgroup, state)


def reconcile_job_sync(sync: PolicySync, live: LiveObjects | None = None) -> bool:
    """Check one applied/drifted row; mark drift (with the keys), heal when the cluster says so.

    Returns True when the row is clean and unchanged (its ``checked_at`` is then updated in bulk).
    """
    try:
        drift = drift_of(sync, live)
    except ClusterError as exc:
        log.info("drift check of %s skipped: %s", sync, exc.message)
        return False
    now = timezone.now()
    if not drift:
        if sync.state != State.DRIFTED:
            return True
        with transaction.atomic():
            PolicySync.objects.filter(pk=sync.pk).update(state=State.APPLIED, drift=[], checked_at=now)
            event_record(
                job=sync.job,
                kind="policy.drift_resolved",
                source="reconcile",
                message=f"live objects match policy revision {sync.generation} again",
            )
        return False
    keys = [d.as_dict() for d in drift]
    if sync.state != State.DRIFTED or sync.drift != keys:
        with transaction.atomic():
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
        lease = now + timedelta(seconds=settings.PUSH_LEASE_SECONDS)  # the sweep leaves it queued
        PolicySync.objects.filter(pk=sync.pk, state=State.DRIFTED).update(
            state=State.PENDING, claim_token="", lease_expires_at=lease
        )
        enqueue_push(sync.pk)
    return False


def reconcile_all() -> int:
    """Drift-check the latest applied/drifted row of every live job; returns how many were checked.

    Per cluster: list its AscendJobs and PodGroups once, compare every job in memory, write only
    what changed (and ``checked_at`` for the clean ones in one UPDATE).
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
    by_cluster: dict[int, list[PolicySync]] = {}
    for sync in rows:
        by_cluster.setdefault(sync.job.cluster_id, []).append(sync)
    for syncs in by_cluster.values():
        try:
            live = LiveObjects.fetch(syncs[0])
        except ClusterError as exc:
            log.info("drift sweep of cluster %s skipped: %s", syncs[0].job.cluster.name, exc.message)
            continue
        clean = [sync.pk for sync in syncs if reconcile_job_sync(sync, live)]
        PolicySync.objects.filter(pk__in=clean).update(checked_at=timezone.now())
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

"""Watches PodGroups for ClusterD's platform-mode questions and hands them to the decision service.

It also keeps each platform-mode PodGroup's standing answer in place (a PodGroup created from a job
rendered before the standing answer existed, or one someone emptied by hand): without it ClusterD
would wait 300 s at the next fault and fail with code 508.

A dedicated watch (not a poll) keeps the question → answer latency far under ClusterD's 3 s poll.
"""

from __future__ import annotations

import logging
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import close_old_connections, connection

from apps.cluster.errors import ClusterError
from apps.cluster.watch import WatchHandler, WatchLoop, WatchTarget
from apps.core import metrics
from apps.core.supervision import Supervisor
from apps.decisions.leases import LEASE_POLL_SECONDS, ClusterWatchers, DecideLeases
from apps.decisions.services import decision_observe, is_standing
from apps.events import broadcast
from apps.jobs.clusters import ClusterRescan, cluster_ref
from apps.jobs.models import Cluster, TrainingJob
from mindcluster import keys as c

log = logging.getLogger(__name__)
_UID_LENGTH = 36


def job_for_podgroup(cluster: Cluster, podgroup: dict[str, Any]) -> TrainingJob | None:
    """The job of PodGroup ``<job>-<uid>``: by the uid suffix, else by an owner reference."""
    meta = podgroup.get("metadata") or {}
    name = str(meta.get("name", ""))
    namespace = str(meta.get("namespace", ""))
    candidates = {name[-_UID_LENGTH:]} if len(name) > _UID_LENGTH else set()
    for owner in meta.get("ownerReferences") or []:
        if isinstance(owner, dict) and owner.get("kind") == c.ASCENDJOB_KIND and owner.get("uid"):
            candidates.add(str(owner["uid"]))
    return (
        TrainingJob.objects.select_related("cluster", "current_revision")
        .filter(cluster=cluster, namespace=namespace, uid__in=candidates, deleted_at__isnull=True)
        .first()
    )


def handle_podgroup(cluster: Cluster, podgroup: dict[str, Any]) -> None:
    annotations = (podgroup.get("metadata") or {}).get("annotations") or {}
    if c.ANNOTATION_PLATFORM_STRATEGY not in annotations:
        return
    if (
        not annotations.get(c.ANNOTATION_CONFIRM_FAULT)
        and not annotations.get(c.ANNOTATION_RECOVER_STATUS)
        and is_standing(annotations.get(c.ANNOTATION_PLATFORM_STRATEGY))
        and c.ANNOTATION_RESULT_FAULT not in annotations
    ):
        return  # no question, no outcome, and a standing answer in place: nothing to do
    labels = (podgroup.get("metadata") or {}).get("labels") or {}
    if (
        c.ANNOTATION_RESULT_FAULT in annotations
        and not annotations.get(c.ANNOTATION_RECOVER_STATUS)
        and labels.get(c.LABEL_PROCESS_RECOVER_ENABLE) != c.PROCESS_RECOVER_PAUSE
    ):
        # Answered, no outcome yet (or a stale copy): no database work while ClusterD recovers. The
        # label at pause is an outcome: FaultRetry, the end of an exit or dump (services.py, D1/D2).
        return
    job = job_for_podgroup(cluster, podgroup)
    if job is None:
        return
    decision_observe(job=job, podgroup=podgroup)


class PodGroupWatcher(WatchHandler):
    """Follow one cluster's PodGroups (the cluster adapter's watch loop) and answer their questions."""

    def __init__(
        self, cluster: Cluster, *, watch_timeout: int = 60, lanes: int = 8, shard: int = 0, shards: int = 1
    ) -> None:
        self.cluster = cluster
        self.shard = shard
        self.shards = shards
        self.ref = cluster_ref(cluster)
        self.watch_timeout = watch_timeout
        self.stopped = threading.Event()
        # Many jobs fault at once (a switch failure): answer them in parallel, but keep each
        # PodGroup's changes in order by always using the same single-threaded lane for it.
        self.lanes = [ThreadPoolExecutor(1, thread_name_prefix=f"decide-{i}") for i in range(lanes)]

    # --- what the watch loop sees -----------------------------------------------------------------
    def listed(self, items: list[dict[str, Any]], resource_version: str) -> None:
        for item in items:
            self.dispatch(item)

    def changed(self, event_type: str, obj: dict[str, Any], resource_version: str) -> None:
        if event_type in ("ADDED", "MODIFIED"):
            self.dispatch(obj)

    def expired(self, error: ClusterError) -> None:
        metrics.WATCH_RESTARTS.labels(process="decide", resource="podgroups", reason="expired").inc()

    def failed(self, error: ClusterError, delay: float) -> None:
        metrics.WATCH_RESTARTS.labels(process="decide", resource="podgroups", reason="error").inc()

    def dispatch(self, podgroup: dict[str, Any]) -> None:
        name = str((podgroup.get("metadata") or {}).get("name", ""))
        digest = zlib.crc32(name.encode())
        if digest % self.shards != self.shard:
            return  # another decide process answers for this PodGroup
        lane = self.lanes[(digest // self.shards) % len(self.lanes)]
        lane.submit(self._handle, podgroup)

    def _handle(self, podgroup: dict[str, Any]) -> None:
        if self.stopped.is_set():
            return  # the cluster's lease is being given back: its next holder answers (it lists)
        try:
            close_old_connections()
            handle_podgroup(self.cluster, podgroup)
        except Exception:  # one bad object must not stop the lane
            log.exception("cluster %s: handling a PodGroup failed", self.cluster.name)
        finally:
            # Hand the connection back to the process's pool (DB_POOL_MAX, default 8) at once: with
            # 8 lanes each keeping one between events, a ninth thread waited the pool's 10 s timeout
            # in the 50-job benchmark while ClusterD waited for its answer.
            connection.close()

    def run(self) -> None:
        """Follow PodGroups until stopped; a crash (the database, a bug) restarts the watch (supervised)."""
        try:
            Supervisor(f"decide-{self.cluster.name}-{self.shard}", self._watch, stop=self.stopped).run()
        finally:
            for lane in self.lanes:
                lane.submit(connection.close)  # each lane thread closes its own database connection
                lane.shutdown(wait=True)
            connection.close()  # and this thread's

    def _watch(self) -> None:
        WatchLoop(
            self.ref, WatchTarget("podgroups"), self, self.stopped, watch_timeout=self.watch_timeout
        ).run()

    def stop(self) -> None:
        self.stopped.set()


def run_decision_watchers(
    stop: threading.Event,
    *,
    shard: int = 0,
    shards: int = 1,
    rescan_seconds: float | None = None,
    poll_seconds: float = LEASE_POLL_SECONDS,
    cluster_names: list[str] | None = None,
) -> None:
    """Answer for the clusters whose ``decide`` lease this process holds (its fair share of them,
    ``apps.decisions.leases``) until ``stop``; the others' leases are polled as a standby.

    The clusters are listed again every ``CLUSTER_RESCAN_SECONDS`` (``rescan_seconds``,
    ``apps.jobs.clusters.ClusterRescan``): listing them once at start left a cluster registered a
    moment later unanswered until ClusterD gave up (the deploy rehearsal found it). ``cluster_names``:
    only those clusters."""
    broadcast.warm()  # the first decision's events must not wait for the channel layer to be built
    rescan = ClusterRescan(cluster_names, every=rescan_seconds)
    watchers = ClusterWatchers(lambda cluster: PodGroupWatcher(cluster, shard=shard, shards=shards))
    leases = DecideLeases(taken=watchers.start, released=watchers.stop)
    try:
        while True:
            leases.step(rescan.clusters())
            close_old_connections()
            connection.close()  # back to the pool between polls
            if stop.wait(min(poll_seconds, rescan.every)):
                break
    finally:
        watchers.stop_all()
        leases.close()

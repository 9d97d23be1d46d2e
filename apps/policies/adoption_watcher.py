"""The adoption watcher: follows every configured cluster's AscendJobs (the cluster adapter's watch
loop) and keeps TrainingJob rows in step: adopted while they exist, marked deleted when they go."""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.db import close_old_connections, connection

from apps.cluster.watch import Backoff, WatchHandler, WatchLoop, WatchTarget
from apps.jobs.clusters import cluster_ref
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.adoption import job_adopt, job_mark_deleted

log = logging.getLogger(__name__)


class ClusterJobWatcher:
    """Keeps TrainingJob rows in step with one cluster's AscendJobs. Restartable at any moment."""

    def __init__(self, cluster: Cluster, *, watch_timeout: int = 60, backoff_max: float = 30.0) -> None:
        self.cluster = cluster
        self.ref = cluster_ref(cluster)
        self.watch_timeout = watch_timeout
        self.backoff_max = backoff_max
        self.stopped = threading.Event()

    def namespaces(self) -> list[str | None]:
        return list(self.cluster.namespaces) or [None]

    def relist(self, namespace: str | None) -> str:
        """Adopt every job present, mark those gone as deleted; return the rv to watch from."""
        handler = _Adoption(self.cluster, namespace)
        loop = WatchLoop(self.ref, WatchTarget("ascendjobs", namespace), handler, self.stopped)
        return loop.relist()

    def run(self, namespace: str | None = None) -> None:
        try:
            WatchLoop(
                self.ref,
                WatchTarget("ascendjobs", namespace),
                _Adoption(self.cluster, namespace),
                self.stopped,
                watch_timeout=self.watch_timeout,
                backoff=Backoff(maximum=self.backoff_max),
            ).run()
        finally:
            connection.close()  # this thread's database connection

    def stop(self) -> None:
        self.stopped.set()


class _Adoption(WatchHandler):
    """What one (cluster, namespace) watch of AscendJobs means for the TrainingJob rows."""

    def __init__(self, cluster: Cluster, namespace: str | None) -> None:
        self.cluster = cluster
        self.namespace = namespace

    def listed(self, items: list[dict[str, Any]], resource_version: str) -> None:
        close_old_connections()
        seen = set()
        for manifest in items:
            meta = manifest.get("metadata") or {}
            seen.add((meta.get("namespace"), meta.get("name")))
            job_adopt(cluster=self.cluster, manifest=manifest)
        # A relist after 410 is the only news of a job deleted while the watch was gone.
        live = TrainingJob.objects.filter(cluster=self.cluster, deleted_at__isnull=True)
        if self.namespace:
            live = live.filter(namespace=self.namespace)
        for job in live.only("namespace", "name"):
            if (job.namespace, job.name) not in seen:
                job_mark_deleted(cluster=self.cluster, namespace=job.namespace, name=job.name)

    def changed(self, event_type: str, obj: dict[str, Any], resource_version: str) -> None:
        close_old_connections()
        if event_type in ("ADDED", "MODIFIED"):
            job_adopt(cluster=self.cluster, manifest=obj)
            return
        meta = obj.get("metadata") or {}
        job_mark_deleted(
            cluster=self.cluster,
            namespace=meta.get("namespace", ""),
            name=meta.get("name", ""),
            uid=str(meta.get("uid", "")),
        )


def run_watchers(stop: threading.Event) -> None:
    """One thread per (cluster, namespace) until ``stop`` is set."""
    watchers: list[ClusterJobWatcher] = []
    for cluster in Cluster.objects.all():
        watcher = ClusterJobWatcher(cluster)
        watchers.append(watcher)
        for namespace in watcher.namespaces():
            threading.Thread(
                target=watcher.run,
                args=(namespace,),
                daemon=True,
                name=f"watch-{cluster.name}-{namespace or 'all'}",
            ).start()
    while not stop.wait(0.5):  # a timed wait: the signal handler that sets ``stop`` runs in between
        pass
    for watcher in watchers:
        watcher.stop()

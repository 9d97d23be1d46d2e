"""The adoption watcher: list, then watch, every configured cluster's AscendJobs; relist on 410."""

from __future__ import annotations

import logging
import threading
import time

from django.db import close_old_connections, connection

from apps.cluster import client as kube
from apps.cluster.errors import ClusterError
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
        items, resource_version = kube.list_all_ascendjobs(self.ref, namespace)
        seen = set()
        for manifest in items:
            meta = manifest.get("metadata") or {}
            seen.add((meta.get("namespace"), meta.get("name")))
            job_adopt(cluster=self.cluster, manifest=manifest)
        live = TrainingJob.objects.filter(cluster=self.cluster, deleted_at__isnull=True)
        if namespace:
            live = live.filter(namespace=namespace)
        for job in live.only("namespace", "name"):
            if (job.namespace, job.name) not in seen:
                job_mark_deleted(cluster=self.cluster, namespace=job.namespace, name=job.name)
        return resource_version

    def run_once(self, namespace: str | None, resource_version: str) -> str:
        """One watch call; returns the resourceVersion to resume from."""
        for event_type, obj in kube.watch_ascendjobs(
            self.ref,
            resource_version=resource_version,
            namespace=namespace,
            timeout_seconds=self.watch_timeout,
        ):
            meta = obj.get("metadata") or {}
            resource_version = str(meta.get("resourceVersion") or resource_version)
            if event_type in ("ADDED", "MODIFIED"):
                job_adopt(cluster=self.cluster, manifest=obj)
            elif event_type == "DELETED":
                job_mark_deleted(
                    cluster=self.cluster,
                    namespace=meta.get("namespace", ""),
                    name=meta.get("name", ""),
                    uid=str(meta.get("uid", "")),
                )
            if self.stopped.is_set():
                break
        return resource_version

    def run(self, namespace: str | None = None) -> None:
        try:
            self._run(namespace)
        finally:
            connection.close()  # this thread's database connection

    def _run(self, namespace: str | None) -> None:
        delay = 0.5
        resource_version = ""
        while not self.stopped.is_set():
            try:
                close_old_connections()
                if not resource_version:
                    resource_version = self.relist(namespace)
                resource_version = self.run_once(namespace, resource_version)
                delay = 0.5
            except ClusterError as exc:
                if exc.status == 410:
                    log.info("cluster %s: watch expired, relisting", self.cluster.name)
                    resource_version = ""
                    continue
                log.warning("cluster %s: %s; retrying in %.1fs", self.cluster.name, exc.message, delay)
                self.stopped.wait(delay)
                delay = min(self.backoff_max, delay * 2)

    def stop(self) -> None:
        self.stopped.set()


def run_watchers(stop: threading.Event) -> None:
    """One thread per (cluster, namespace) until ``stop`` is set."""
    watchers: list[ClusterJobWatcher] = []
    threads: list[threading.Thread] = []
    for cluster in Cluster.objects.all():
        watcher = ClusterJobWatcher(cluster)
        watchers.append(watcher)
        for namespace in watcher.namespaces():
            thread = threading.Thread(
                target=watcher.run,
                args=(namespace,),
                daemon=True,
                name=f"watch-{cluster.name}-{namespace or 'all'}",
            )
            thread.start()
            threads.append(thread)
    while not stop.is_set():
        time.sleep(0.5)
    for watcher in watchers:
        watcher.stop()

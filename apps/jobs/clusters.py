"""Clusters: registering the default one from KUBECONFIG, and checking that each answers."""

from __future__ import annotations

import logging
import math
import time

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from apps.cluster import client as kube
from apps.cluster.errors import ClusterError
from apps.jobs.models import Cluster

log = logging.getLogger(__name__)


def cluster_ref(cluster: Cluster) -> kube.ClusterRef:
    return kube.ClusterRef(
        name=cluster.name,
        kubeconfig_path=cluster.kubeconfig_path,
        context=cluster.context,
        in_cluster=cluster.in_cluster,
    )


def cluster_register_default(
    *, kubeconfig: str | None = None, name: str = "default", clusterd_address: str | None = None
) -> Cluster | None:
    """Register (or refresh) the cluster of ``KUBECONFIG``'s current context as the default one.

    With ``KUBE_IN_CLUSTER`` (deploy/'s pods) the row is the local cluster, path empty: every process
    that reads it uses its own credentials (``apps.cluster.client.load_credentials``), never the
    registering process's, even when this process also has a ``KUBECONFIG``.
    """
    path = kubeconfig if kubeconfig is not None else settings.KUBECONFIG
    if kubeconfig is None and settings.KUBE_IN_CLUSTER:
        cluster, _ = Cluster.objects.update_or_create(
            name=name,
            defaults={
                "in_cluster": True,
                "kubeconfig_path": "",
                "is_default": True,
                "clusterd_address": clusterd_address or settings.CLUSTERD_ADDRESS,
            },
        )
        kube.forget_client(cluster_ref(cluster))
        return cluster
    if not path:
        return None
    cluster, _ = Cluster.objects.update_or_create(
        name=name,
        defaults={
            "kubeconfig_path": path.split(":")[0],
            "in_cluster": False,
            "is_default": True,
            "clusterd_address": clusterd_address
            if clusterd_address is not None
            else settings.CLUSTERD_ADDRESS,
        },
    )
    Cluster.objects.exclude(pk=cluster.pk).filter(is_default=True).update(is_default=False)
    kube.forget_client(cluster_ref(cluster))
    return cluster


def cluster_check_health(cluster: Cluster) -> bool:
    """Ask the API server for its version; record the answer on the row."""
    try:
        version = kube.server_version(cluster_ref(cluster))
        healthy, message = True, f"reachable, Kubernetes {version}"
    except ClusterError as exc:
        healthy, message = False, exc.message
    Cluster.objects.filter(pk=cluster.pk).update(
        healthy=healthy, health_message=message[:500], health_checked_at=timezone.now()
    )
    return healthy


class ClusterRescan:
    """The clusters a long-running process (``ingest``, ``decide``) competes for: every configured one,
    or those ``names``, listed again every ``CLUSTER_RESCAN_SECONDS``.

    Listing them once at start left a cluster added later (in the API or the admin, or the default one
    another process registers a moment after this one started, as in a fresh install) unwatched until
    a restart, and kept watching one that was removed. A listing that fails keeps the last one: the
    leases held stay held, and the next call lists again.
    """

    def __init__(self, names: list[str] | None = None, *, every: float | None = None) -> None:
        self.names = names or None
        self.every = float(settings.CLUSTER_RESCAN_SECONDS if every is None else every)
        self._clusters: list[Cluster] = []
        self._listed_at = -math.inf

    def clusters(self) -> list[Cluster]:
        """The clusters, listed again when the last listing is ``every`` seconds old."""
        now = time.monotonic()
        if now - self._listed_at >= self.every:
            rows = Cluster.objects.order_by("pk")
            try:
                self._clusters = list(rows.filter(name__in=self.names) if self.names else rows)
                self._listed_at = now
            except DatabaseError as exc:
                log.warning("cannot list the clusters: %s", exc)
                connection.close()
        return self._clusters

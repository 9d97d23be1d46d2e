"""Clusters: registering the default one from KUBECONFIG, and checking that each answers."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from apps.cluster import client as kube
from apps.cluster.errors import ClusterError
from apps.jobs.models import Cluster


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

"""Celery entry points for clusters."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="jobs.check_clusters")
def check_clusters() -> dict[str, bool]:
    from apps.jobs.clusters import cluster_check_health
    from apps.jobs.models import Cluster

    return {cluster.name: cluster_check_health(cluster) for cluster in Cluster.objects.all()}

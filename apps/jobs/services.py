"""Writes on jobs that interfaces call: registering a job by hand (adoption lives in ``adoption.py``)."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from apps.audit.actors import Actor
from apps.audit.services import audit_record
from apps.core.errors import ApplicationError
from apps.jobs.models import Cluster, TrainingJob


class JobAlreadyRegistered(ApplicationError):
    """A live job with this cluster, namespace and name exists already."""

    def __init__(self, job: TrainingJob) -> None:
        self.job = job
        super().__init__(
            f"job {job.namespace}/{job.name} is already registered in cluster {job.cluster.name} "
            f"(id {job.pk})"
        )


def job_snapshot(job: TrainingJob) -> dict[str, Any]:
    """The registered facts of a job, as the audit trail records them."""
    return {
        "cluster": job.cluster.name,
        "namespace": job.namespace,
        "name": job.name,
        "framework": job.framework,
        "replicas": dict(job.replicas),
        "npus_per_pod": job.npus_per_pod,
        "mindcluster_version": job.mindcluster_version,
    }


def job_register(
    *,
    cluster: Cluster,
    namespace: str,
    name: str,
    framework: str,
    replicas: dict[str, int],
    npus_per_pod: int,
    mindcluster_version: str,
    actor: Actor,
) -> TrainingJob:
    """Register a job the control plane should manage before (or without) adopting it from the cluster."""
    existing = TrainingJob.objects.filter(
        cluster=cluster, namespace=namespace, name=name, deleted_at__isnull=True
    ).first()
    if existing is not None:
        raise JobAlreadyRegistered(existing)
    try:
        with transaction.atomic():
            job = TrainingJob.objects.create(
                cluster=cluster,
                namespace=namespace,
                name=name,
                framework=framework,
                replicas=dict(replicas),
                npus_per_pod=npus_per_pod,
                mindcluster_version=mindcluster_version,
                source=TrainingJob.Source.REGISTERED,
            )
            audit_record(
                actor=actor,
                action="job.register",
                obj=job,
                before=None,
                after=job_snapshot(job),
            )
    except IntegrityError:
        # Two registrations raced; the unique constraint let exactly one through.
        raise JobAlreadyRegistered(
            TrainingJob.objects.get(cluster=cluster, namespace=namespace, name=name, deleted_at__isnull=True)
        ) from None
    return job

"""A job with hand-computable fault histories: 2 pods x 8 NPUs = 16 NPUs, created a month ago, and
incidents seeded straight into the database (the ingester's own tests cover how they get there)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from apps.events.models import Incident
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.models import PolicyRevision, PolicySync
from apps.policies.validation import validate_policy

NPUS = 16


def make_job(cluster: Cluster, name: str = "llama", namespace: str = "team-a") -> TrainingJob:
    job = TrainingJob.objects.create(
        cluster=cluster,
        namespace=namespace,
        name=name,
        framework="pytorch",
        replicas={"Master": 1, "Worker": 1},
        npus_per_pod=8,
        mindcluster_version="26.1",
    )
    TrainingJob.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(days=30))
    job.refresh_from_db()
    return job


def add_revision(job: TrainingJob, spec: dict[str, Any], *, sync: str | None = None) -> PolicyRevision:
    """A revision (made current), optionally with a push in state ``sync``."""
    canonical = validate_policy({"mindcluster_version": "26.1", **spec}).spec
    assert canonical is not None
    number = (PolicyRevision.objects.filter(job=job).count()) + 1
    revision = PolicyRevision.objects.create(job=job, number=number, spec=canonical.to_dict())
    if sync is not None:
        PolicySync.objects.create(job=job, revision=revision, generation=number, state=sync)
    job.current_revision = revision
    job.save(update_fields=["current_revision"])
    return revision


def add_incident(
    job: TrainingJob,
    *,
    kind: str = "uce",
    ranks: tuple[int, ...] = (9,),
    level: str = "",
    strategies: tuple[str, ...] = ("retry",),
    attempts: tuple[tuple[str, str], ...] = (("retry", "succeeded"),),
    outcome: str = "recovered",
    at: datetime | None = None,
    detect_ms: int | None = None,
    decide_ms: int | None = None,
    recover_ms: int | None = None,
) -> Incident:
    number = Incident.objects.filter(job=job).count() + 1
    opened = at or timezone.now() - timedelta(days=1, minutes=number)
    return Incident.objects.create(
        job=job,
        number=number,
        opened_at=opened,
        closed_at=opened + timedelta(minutes=1),
        outcome=outcome,
        fault={"types": [kind], "levels": [level] if level else [], "codes": []},
        strategies=list(strategies),
        attempts=[{"strategy": s, "outcome": o, "at": opened.isoformat()} for s, o in attempts],
        ranks=list(ranks),
        detect_ms=detect_ms,
        decide_ms=decide_ms,
        recover_ms=recover_ms,
        first_seq=number,
        last_seq=number,
    )


@pytest.fixture
def cluster(db: Any, tmp_path: Any) -> Cluster:
    return Cluster.objects.create(name="sim", kubeconfig_path=str(tmp_path / "missing-kubeconfig"))


@pytest.fixture
def job(cluster: Cluster) -> TrainingJob:
    return make_job(cluster)

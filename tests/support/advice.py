"""Jobs with hand-computable fault histories for the advice tests: 2 pods x 8 NPUs = 16 NPUs, created
a month ago, and incidents seeded straight into the database (the ingester's own tests cover how they
get there)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from apps.events.models import Incident
from apps.jobs.incarnations import incarnation_observe_podgroup
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.desired import desired_state
from apps.policies.models import PolicyRevision, PolicySync
from apps.policies.spec import PolicySpec
from apps.policies.validation import validate_policy
from mindcluster import keys as c
from tests.support.world import operator_podgroup, training_job

NPUS = 16


def month_old_training_job(cluster: Cluster, name: str = "llama", namespace: str = "team-a") -> TrainingJob:
    """A TrainingJob row of 2 pods x 8 NPUs with a uid, created 30 days ago (advice prices per month)."""
    job = training_job(cluster, name, namespace, uid=str(uuid.uuid4()))
    TrainingJob.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(days=30))
    job.refresh_from_db()
    return job


def add_revision(
    job: TrainingJob, spec: dict[str, Any], *, sync: str | None = None, created_with: bool = False
) -> PolicyRevision:
    """A revision (made current), optionally with a push in state ``sync``; ``created_with`` says the
    job was created with it: its PodGroup is observed as the operator makes it from the rendered
    manifest, which is what puts a revision in effect (design §4.4), not a written push."""
    canonical = validate_policy({"mindcluster_version": "26.1", **spec}).spec
    assert canonical is not None
    number = (PolicyRevision.objects.filter(job=job).count()) + 1
    revision = PolicyRevision.objects.create(job=job, number=number, spec=canonical.to_dict())
    if sync is not None:
        PolicySync.objects.create(job=job, revision=revision, generation=number, state=sync)
    job.current_revision = revision
    job.save(update_fields=["current_revision"])
    if created_with:
        _observe_created_with(job, canonical, number)
    return revision


def _observe_created_with(job: TrainingJob, spec: PolicySpec, number: int) -> None:
    manifest = {
        "apiVersion": c.ASCENDJOB_API_VERSION,
        "kind": c.ASCENDJOB_KIND,
        "metadata": {"name": job.name, "namespace": job.namespace, "labels": {"framework": "pytorch"}},
        "spec": {"replicaSpecs": {}},
    }
    meta = desired_state(manifest, spec, number).manifest["metadata"]
    podgroup = operator_podgroup(job, dict(meta.get("labels") or {}), dict(meta.get("annotations") or {}))
    assert incarnation_observe_podgroup(job, podgroup, "ingester")


def incident_row(
    job: TrainingJob,
    number: int,
    opened: datetime,
    *,
    kind: str = "uce",
    ranks: tuple[int, ...] = (9,),
    level: str = "",
    strategies: tuple[str, ...] = ("retry",),
    attempts: tuple[tuple[str, str], ...] = (("retry", "succeeded"),),
    outcome: str = "recovered",
    detect_ms: int | None = None,
    decide_ms: int | None = None,
    recover_ms: int | None = None,
) -> Incident:
    """An unsaved closed incident of one fault, a minute long, as the ingester stores it (its events
    seq ``number``): a row to save, or to ``bulk_create`` many of (bench/bench_advice.py)."""
    return Incident(
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


def add_incident(job: TrainingJob, *, at: datetime | None = None, **fault: Any) -> Incident:
    """The job's next incident, stored; ``at``: when it opened (default a day ago); ``fault``: the
    keywords of :func:`incident_row`."""
    number = Incident.objects.filter(job=job).count() + 1
    incident = incident_row(job, number, at or timezone.now() - timedelta(days=1, minutes=number), **fault)
    incident.save()
    return incident

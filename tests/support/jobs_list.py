"""Jobs for the jobs-list tests: a spread of phases, strategies, faults and advice figures."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from apps.advice.models import AdviceSummary
from apps.audit.actors import Actor
from apps.events.models import Incident
from apps.jobs.models import TrainingJob
from apps.policies.services import policy_revision_create
from tests.support.world import World, training_job


def add_jobs(world: World, n: int, start: int = 0) -> list[TrainingJob]:
    """``n`` jobs in team-a with a spread of phases, strategies, faults and advice figures."""
    jobs = []
    now = timezone.now()
    for i in range(start, start + n):
        job = training_job(world.cluster, f"job-{i:03d}", phase=("Running", "Failed", "")[i % 3])
        if i % 2:
            strategies = ["retry", "recover"] if i % 4 == 1 else ["dump"]
            policy_revision_create(job=job, spec={"strategies": strategies}, actor=Actor(name="t"))
        if i % 5 == 0:
            Incident.objects.create(
                job=job, number=1, opened_at=now - timedelta(minutes=i), first_seq=1, last_seq=1
            )
            TrainingJob.objects.filter(pk=job.pk).update(last_fault_at=now - timedelta(minutes=i))
        if i % 3 == 0:
            AdviceSummary.objects.create(job=job, could_save=float(i), computed_at=now)
            TrainingJob.objects.filter(pk=job.pk).update(could_save=float(i))
        jobs.append(job)
    return jobs

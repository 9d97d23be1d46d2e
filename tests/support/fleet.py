"""A hand-computable fleet for the fleet-view tests: two clusters, three jobs with known NPUs and
incidents stored through the events app (so the summaries are kept as in production), each incident's
events at known times.

| job | cluster / namespace | NPUs | incidents (fault → stopped → chosen → running) |
|---|---|---|---|
| llama | east / team-a | 2 pods x 8 = 16 | 2 x UCE: +5 s stopped, retry chosen at once, running at +65 s |
| gpt | east / team-a | 4 pods x 8 = 32 | 1 x node fault: +10 s, job-rescheduling at +12 s, back at +212 s |
| bert | west / team-b | 1 pod x 4 = 4 | 1 x HCCL: +3 s, recover at +4 s, failed, the job Failed at +40 s |
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from pathlib import Path

from django.utils import timezone

from apps.events import kinds
from apps.events.services import event_store
from apps.jobs.models import Cluster, TrainingJob
from tests.support.world import training_job


@dataclass
class Fleet:
    east: Cluster
    west: Cluster
    llama: TrainingJob
    gpt: TrainingJob
    bert: TrainingJob
    created: datetime  # every job's creation: the start of the day before yesterday (UTC)
    faults_at: datetime  # yesterday, noon UTC


def _store(job: TrainingJob, kind: str, at: datetime, **data: object) -> None:
    event_store(job=job, kind=kind, message=kind, source="ingest", data=dict(data), occurred_at=at)


def incident(job: TrainingJob, at: datetime, steps: list[tuple[float, str, dict[str, object]]]) -> None:
    """Store one incident's events, each ``(seconds after the fault, kind, data)``."""
    for offset, kind, data in steps:
        _store(job, kind, at + timedelta(seconds=offset), **data)


def retry_incident(job: TrainingJob, at: datetime, code: str) -> None:
    incident(
        job,
        at,
        [
            (0, kinds.FAULT_DETECTED, {"code": code, "fault_type": "uce", "ranks": [9]}),
            (5, kinds.TRAINING_STOPPED, {"ranks": [9]}),
            (5, kinds.STRATEGY_CHOSEN, {"strategy": "retry"}),
            (65, kinds.RECOVERY_SUCCEEDED, {"strategy": "retry"}),
        ],
    )


def small_fleet(tmp_path: Path) -> Fleet:
    east = Cluster.objects.create(name="east", kubeconfig_path=str(tmp_path / "missing"))
    west = Cluster.objects.create(name="west", kubeconfig_path=str(tmp_path / "missing"))
    llama = training_job(east, "llama", "team-a")
    gpt = training_job(east, "gpt", "team-a", replicas={"Master": 1, "Worker": 3})
    bert = training_job(west, "bert", "team-b", replicas={"Master": 1}, npus_per_pod=4)
    midnight = datetime.combine(timezone.now().astimezone(UTC).date(), time.min, tzinfo=UTC)
    created = midnight - timedelta(days=2)
    TrainingJob.objects.update(created_at=created)
    at = midnight - timedelta(hours=12)
    retry_incident(llama, at, "80C98000")
    retry_incident(llama, at + timedelta(hours=1), "80C98002")
    incident(
        gpt,
        at,
        [
            (0, kinds.FAULT_DETECTED, {"code": "8C1F8608", "fault_type": "node", "ranks": [0]}),
            (10, kinds.TRAINING_STOPPED, {"ranks": [0]}),
            (12, kinds.STRATEGY_CHOSEN, {"strategy": "job-rescheduling"}),
            (212, kinds.JOB_RESCHEDULED, {"reasons": [], "pods": [], "nodes": [], "total": 1}),
        ],
    )
    incident(
        bert,
        at,
        [
            (0, kinds.FAULT_DETECTED, {"code": "", "fault_type": "hccl", "ranks": [1]}),
            (3, kinds.TRAINING_STOPPED, {"ranks": [1]}),
            (4, kinds.STRATEGY_CHOSEN, {"strategy": "recover"}),
            (30, kinds.RECOVERY_FAILED, {"strategy": "recover"}),
            (40, kinds.JOB_PHASE_CHANGED, {"phase": "Failed", "previous": "Running"}),
        ],
    )
    for job in (llama, gpt, bert):
        job.refresh_from_db()
    return Fleet(east, west, llama, gpt, bert, created, at)

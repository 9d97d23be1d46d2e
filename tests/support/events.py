"""Reading what the ingester stored: events in sequence, closed incidents, a dump for
failure messages.

The simulated cluster, the in-process ingester and private brokers are fixtures in the root
``tests/conftest.py``; subprocess servers are in ``tests.support.processes``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from django.utils import timezone

from apps.events.models import Incident, JobEvent
from apps.ingest.observation import JobRef, Observation
from apps.ingest.store import IngestStore
from apps.jobs.models import Cluster, TrainingJob
from tests.support.processes import wait_for


def observe(
    store: IngestStore,
    job: TrainingJob,
    kind: str,
    *,
    source: str = "test",
    at: datetime | None = None,
    **data: Any,
) -> JobEvent | None:
    """Record one observation of ``job`` as ``source`` would; each has a new source identity (dedupe key)."""
    return store.record(
        Observation(
            job=JobRef(job.namespace, job.name, job.uid),
            kind=kind,
            message=kind,
            source=source,
            data=data,
            dedupe_key=f"{source}:{uuid.uuid4()}",
            occurred_at=at or timezone.now(),
        )
    )


def job_row(cluster: Cluster, namespace: str, name: str, timeout: float = 15) -> TrainingJob:
    return wait_for(
        lambda: TrainingJob.objects.filter(cluster=cluster, namespace=namespace, name=name).first(),
        timeout,
        f"job {namespace}/{name} adopted",
    )


def kinds_of(job: TrainingJob) -> list[str]:
    return list(JobEvent.objects.filter(job=job).order_by("seq").values_list("kind", flat=True))


def assert_gap_free(job: TrainingJob) -> None:
    seqs = list(JobEvent.objects.filter(job=job).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)), seqs


def closed_incidents(job: TrainingJob) -> list[Incident]:
    return list(Incident.objects.filter(job=job, closed_at__isnull=False).order_by("number"))


def dump(cluster: Cluster) -> str:
    """Everything stored for the cluster, for a failure message."""
    lines = []
    for job in TrainingJob.objects.filter(cluster=cluster):
        lines += [f"--- {job.name}"] + [
            f"incident {i.number} {i.outcome} {i.strategies} {i.fault.get('fault_ids')} "
            f"seq {i.first_seq}-{i.last_seq}"
            for i in Incident.objects.filter(job=job).order_by("number")
        ]
        lines += [
            f"{e.seq} {e.kind} {e.source} {e.dedupe_key} {e.occurred_at:%H:%M:%S.%f}"
            f" stored {e.stored_at:%H:%M:%S.%f}"
            for e in JobEvent.objects.filter(job=job).order_by("seq")
        ]
    return "\n".join(lines)


def wait_all_recovered(cluster: Cluster, faults: int, timeout: float, log: Callable[[], str] = str) -> None:
    """Wait until ``faults`` incidents of ``cluster`` are recovered; else fail with the events stored
    (and the tail of ``log()``, e.g. the ingester's output)."""
    try:
        wait_for(
            lambda: (
                Incident.objects.filter(job__cluster=cluster, outcome=Incident.Outcome.RECOVERED).count()
                == faults
            ),
            timeout,
            "every fault's incident recovered",
        )
    except AssertionError:
        pytest.fail(f"{dump(cluster)}\n{log()[-3000:]}")

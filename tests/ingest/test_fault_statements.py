"""What one fault costs the store in SQL statements (issue #27: a storm of 200 faults was paced by them).

A fault reaches the ingester as its Kubernetes Event, ClusterD's report of the same fault and the
strategy chosen for it. Each is counted here inside the test's transaction, as the applier's
execute wrapper counts them (``controlplane_ingest_queries_total``; BEGIN and COMMIT are not
statements of the wrapper), plus what runs after the commit (the jobs list's ``last_fault_at``).
The pins are the lower bounds reached by the change that cut them (from 17 + 1, 6, 10 and 5): a
change that adds a statement to this path must say why here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.events import kinds
from apps.events.models import Incident, JobEvent
from apps.ingest import clusterd_faults, k8s_events
from apps.ingest.observation import JobRef, Observation
from apps.ingest.store import IngestStore
from apps.jobs.models import Cluster, TrainingJob

pytestmark = pytest.mark.django_db
CODE = "80E01801"


@pytest.fixture
def store_and_job() -> tuple[IngestStore, TrainingJob]:
    cluster = Cluster.objects.create(name=f"c-{uuid.uuid4().hex[:6]}")
    job = TrainingJob.objects.create(
        cluster=cluster, namespace="team", name="llama", uid=str(uuid.uuid4()), replicas={"Worker": 1}
    )
    store = IngestStore(cluster)
    store.remember(job)  # resolved before: the storm's jobs were adopted long before their faults
    return store, job


def report(job: TrainingJob, kind: str, source: str, key: str, **data: Any) -> Observation:
    return Observation(
        job=JobRef(job.namespace, job.name, job.uid),
        kind=kind,
        message=kind,
        source=source,
        data=data,
        dedupe_key=key,
        occurred_at=timezone.now(),
    )


def statements(run: Callable[[], Any], on_commit: Any) -> tuple[list[str], list[str]]:
    """The SQL of ``run`` in its transaction, and of what it left to run after the commit."""
    with on_commit() as callbacks, CaptureQueriesContext(connection) as inside:
        run()
    with CaptureQueriesContext(connection) as after:
        for callback in callbacks:
            callback()
    return [q["sql"] for q in inside.captured_queries], [q["sql"] for q in after.captured_queries]


def test_a_faults_reports_cost_what_they_must(
    store_and_job: tuple[IngestStore, TrainingJob], django_capture_on_commit_callbacks: Any
) -> None:
    store, job = store_and_job
    event = report(job, kinds.FAULT_DETECTED, k8s_events.SOURCE, "ev-1", code=CODE, fault_id="f-1", ranks=[1])

    # Lock the job, remember the Event, read the candidate incidents, insert the event, insert the
    # incident with it folded in, ask which webhooks want "incident.opened"; after the commit:
    # last_fault_at.
    inside, after = statements(lambda: store.record(event), django_capture_on_commit_callbacks)
    assert (len(inside), len(after)) == (6, 1), inside + after

    # ClusterD's report of the same fault joins it: lock, candidates, the incident's new source.
    clusterd = report(
        job, kinds.FAULT_DETECTED, clusterd_faults.SOURCE, "cd-1", code=CODE, fault_reasons=["f-1"]
    )
    inside, after = statements(lambda: store.record(clusterd), django_capture_on_commit_callbacks)
    assert (len(inside), len(after)) == (3, 0), inside + after

    # The strategy: lock, remember the Event, candidates, insert, fold in (retry uses no budget).
    strategy = report(job, kinds.STRATEGY_CHOSEN, k8s_events.SOURCE, "ev-2", strategy="retry")
    inside, after = statements(lambda: store.record(strategy), django_capture_on_commit_callbacks)
    assert (len(inside), len(after)) == (5, 0), inside + after

    # A replay of an Event already handled (a relist, a restart): lock, and the key says so.
    inside, after = statements(lambda: store.record(event), django_capture_on_commit_callbacks)
    assert (len(inside), len(after)) == (2, 0), inside + after

    (incident,) = Incident.objects.filter(job=job)
    assert incident.fault["fault_ids"] == ["f-1"]
    assert incident.fault["sources"] == [k8s_events.SOURCE, clusterd_faults.SOURCE]
    assert list(JobEvent.objects.filter(job=job).values_list("seq", "kind")) == [
        (1, kinds.FAULT_DETECTED),
        (2, kinds.STRATEGY_CHOSEN),
    ]
    job.refresh_from_db()
    assert job.last_fault_at == incident.opened_at


def test_a_duplicate_dedupe_key_is_skipped_by_the_insert(
    store_and_job: tuple[IngestStore, TrainingJob],
) -> None:
    """Two sources' reports of one outcome share a key: the second stores nothing, and no seq is used."""
    store, job = store_and_job
    store.record(report(job, kinds.FAULT_DETECTED, k8s_events.SOURCE, "ev-1", code=CODE, fault_id="f-1"))
    first = store.record(report(job, kinds.RECOVERY_SUCCEEDED, "podgroup", "pg-1", strategy="retry"))
    second = store.record(report(job, kinds.RECOVERY_SUCCEEDED, "reset-config", "rc-1", strategy="retry"))
    assert first is not None and second is None
    fault = report(job, kinds.FAULT_DETECTED, k8s_events.SOURCE, "ev-2", code=CODE, fault_id="f-2")
    later = store.record(fault)
    assert later is not None and later.seq == first.seq + 1  # gap-free

"""``event_record_many``: a burst in one transaction keeps every promise of ``event_record``."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import connection

from apps.events import kinds
from apps.events.models import Incident, JobEvent
from apps.events.services import NewEvent, event_record, event_record_many
from apps.jobs.models import Cluster, TrainingJob
from tests.support.events import assert_gap_free

pytestmark = pytest.mark.django_db(transaction=True)


def make_job() -> TrainingJob:
    cluster = Cluster.objects.create(name=f"bulk-{uuid.uuid4().hex[:6]}")
    return TrainingJob.objects.create(cluster=cluster, namespace="team-a", name="llama")


def burst(n: int, kind: str = kinds.JOB_WARNING) -> list[NewEvent]:
    return [NewEvent(kind=kind, message=f"m{i}", source="test", data={"i": i}) for i in range(n)]


def test_a_burst_continues_the_seq() -> None:
    job = make_job()
    event_record(job=job, kind=kinds.JOB_WARNING, message="before", source="test")
    stored = event_record_many(
        job=job,
        events=[
            NewEvent(kind=kinds.TRAINING_STOPPED, message="stop", source="test", data={"ranks": [3]}),
            *burst(3),
        ],
    )
    assert [e.seq for e in stored] == [2, 3, 4, 5]
    assert_gap_free(job)
    # As with event_record: incidents are planned by the ingester, not opened by a bare store.
    assert not Incident.objects.filter(job=job).exists()
    assert JobEvent.objects.get(job=job, seq=2).data == {"ranks": [3]}
    assert event_record_many(job=job, events=[]) == []


def test_concurrent_bursts_and_single_writes_stay_gap_free() -> None:
    job = make_job()
    errors: list[BaseException] = []

    def writer(many: bool) -> None:
        try:
            for _ in range(10):
                if many:
                    event_record_many(job=job, events=burst(7))
                else:
                    event_record(job=job, kind=kinds.JOB_WARNING, message="one", source="test")
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(i % 2 == 0,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    assert JobEvent.objects.filter(job=job).count() == 2 * 10 * 7 + 2 * 10
    assert_gap_free(job)

"""A fault report is stored once per (job, fault id), whatever incident is current when it arrives.

The soak (issue #16) stored 0.7 % of fault reports twice: after an ingester restart, a live ClusterD
signal was applied ahead of the watch backlog, and the same fault's Event, arriving minutes later,
was matched only against the *latest* incident (by code) and keyed ``fault:<incident>:<code>``, so it
opened a second incident for a fault already stored. These tests replay reports deterministically.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from apps.events import kinds
from apps.events.models import Incident, JobEvent
from apps.ingest.store import IngestStore
from apps.jobs.models import Cluster, TrainingJob
from tests.support.events import assert_gap_free
from tests.support.events import observe as record

pytestmark = pytest.mark.django_db
CODE = "80E01801"  # one code for every fault: only the fault id tells them apart, as in the soak


@pytest.fixture
def job() -> TrainingJob:
    cluster = Cluster.objects.create(name=f"c-{uuid.uuid4().hex[:6]}")
    return TrainingJob.objects.create(
        cluster=cluster, namespace="team", name="llama", uid=str(uuid.uuid4()), replicas={"Worker": 1}
    )


def observe(store: IngestStore, job: TrainingJob, kind: str, at: datetime, source: str, **data: Any) -> None:
    # Each with a new source identity (dedupe key): the replay is not a byte copy.
    record(store, job, kind, source=source, at=at, **data)


def clusterd_fault(store: IngestStore, job: TrainingJob, fault_id: str, at: datetime) -> None:
    observe(store, job, kinds.FAULT_DETECTED, at, "clusterd", code=CODE, fault_reasons=[fault_id])


def event_fault(store: IngestStore, job: TrainingJob, fault_id: str, at: datetime) -> None:
    observe(store, job, kinds.FAULT_DETECTED, at, "k8s-event", code=CODE, fault_id=fault_id, ranks=[1])


def handled(store: IngestStore, job: TrainingJob, at: datetime) -> None:
    observe(store, job, kinds.STRATEGY_CHOSEN, at + timedelta(seconds=1), "k8s-event", strategy="retry")
    observe(store, job, kinds.RECOVERY_SUCCEEDED, at + timedelta(seconds=2), "podgroup", strategy="retry")


def owners(job: TrainingJob) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for incident in Incident.objects.filter(job=job).order_by("number"):
        for fault_id in incident.fault.get("fault_ids") or []:
            found.setdefault(fault_id, []).append(incident.number)
    return found


def detections(job: TrainingJob) -> int:
    return JobEvent.objects.filter(job=job, kind=kinds.FAULT_DETECTED).count()


def test_a_replayed_report_joins_its_original_incident_after_later_ones(job: TrainingJob) -> None:
    store = IngestStore(job.cluster)
    t0 = timezone.now() - timedelta(minutes=5)
    clusterd_fault(store, job, "fault-1", t0)
    handled(store, job, t0)
    event_fault(store, job, "fault-2", t0 + timedelta(seconds=30))
    handled(store, job, t0 + timedelta(seconds=30))
    assert owners(job) == {"fault-1": [1], "fault-2": [2]}

    # The Event of fault-1 again (a watch replayed from an old cursor, minutes late): not a new fault.
    event_fault(store, job, "fault-1", t0)

    assert detections(job) == 2
    assert Incident.objects.filter(job=job).count() == 2
    assert owners(job) == {"fault-1": [1], "fault-2": [2]}
    first = Incident.objects.get(job=job, number=1)
    assert set(first.fault["sources"]) == {"clusterd", "k8s-event"}  # folded into the original
    assert_gap_free(job)


def test_a_lagging_report_does_not_join_the_open_incident_of_another_fault(job: TrainingJob) -> None:
    store = IngestStore(job.cluster)
    t0 = timezone.now() - timedelta(minutes=5)
    event_fault(store, job, "fault-1", t0)
    handled(store, job, t0)
    clusterd_fault(store, job, "fault-2", t0 + timedelta(seconds=30))  # open, same code
    # fault-1's ClusterD report, applied late (after a restart the stream and the watches disagree).
    clusterd_fault(store, job, "fault-1", t0 + timedelta(seconds=31))

    assert detections(job) == 2
    assert owners(job) == {"fault-1": [1], "fault-2": [2]}
    assert Incident.objects.get(job=job, number=2).closed_at is None


def test_the_same_fault_id_is_one_row_by_key(job: TrainingJob) -> None:
    store = IngestStore(job.cluster)
    t0 = timezone.now() - timedelta(minutes=5)
    clusterd_fault(store, job, "fault-9", t0)
    stored = JobEvent.objects.get(job=job, kind=kinds.FAULT_DETECTED)
    assert stored.dedupe_key == "fault:fault-9"  # (job, key) is unique: no second row in any incident
    clusterd_fault(store, job, "fault-9", t0 + timedelta(minutes=2))
    event_fault(store, job, "fault-9", t0 + timedelta(minutes=3))
    assert detections(job) == 1
    assert Incident.objects.filter(job=job).count() == 1


def _incident_view(job: TrainingJob) -> list[tuple[Any, ...]]:
    """What an operator sees of each incident: its fault, outcome, timings and the kinds it holds."""
    view = []
    for incident in Incident.objects.filter(job=job).order_by("number"):
        held = sorted(
            JobEvent.objects.filter(
                job=job, seq__gte=incident.first_seq, seq__lte=incident.last_seq
            ).values_list("kind", flat=True)
        )
        view.append(
            (
                incident.fault["fault_ids"],
                incident.outcome,
                incident.opened_at,
                incident.detect_ms,
                incident.decide_ms,
                incident.recover_ms,
                held,
            )
        )
    return view


def _with_reference_in_order(job: TrainingJob, report: Any) -> tuple[IngestStore, TrainingJob, datetime]:
    """A second job of the cluster given the same fault in order (its report, then the outcome): what
    ``job``'s incident must look like whatever order its own reports come in."""
    in_order = TrainingJob.objects.create(
        cluster=job.cluster, namespace="team", name="in-order", uid=str(uuid.uuid4()), replicas={"Worker": 1}
    )
    t0 = timezone.now() - timedelta(minutes=5)
    store = IngestStore(job.cluster)
    report(store, in_order, "fault-1", t0)
    handled(store, in_order, t0)
    return store, in_order, t0


@pytest.mark.parametrize("late_source", [event_fault, clusterd_fault])
def test_a_fault_reported_after_its_outcome_is_stored_in_that_incident(
    job: TrainingJob, late_source: Any
) -> None:
    """The fault's source lagged behind the PodGroup's (a take-over replaying the Event backlog, or
    Events kept in an etcd of their own, whose resourceVersions do not order against the others):
    the incident its outcome opened gets the fault.detected it would have had in order. It used to
    be folded in as a "late copy" and stored nowhere: the short soak's failure with 20 incidents
    without their fault.detected (stop 36)."""
    store, in_order, t0 = _with_reference_in_order(job, late_source)

    handled(store, job, t0)  # the outcome first: it opens (and closes) the incident
    late_source(store, job, "fault-1", t0)

    assert detections(job) == 1 and owners(job) == {"fault-1": [1]}
    assert _incident_view(job) == _incident_view(in_order)
    assert _incident_view(job)[0][:2] == (["fault-1"], "recovered")
    # Another source's report of the same fault is a copy now: nothing stored, no new incident.
    (clusterd_fault if late_source is event_fault else event_fault)(store, job, "fault-1", t0)
    assert detections(job) == 1 and Incident.objects.filter(job=job).count() == 1
    assert_gap_free(job)


def test_a_strategy_reported_after_its_outcome_joins_that_incident(job: TrainingJob) -> None:
    """The strategy's Event lagged the PodGroup's outcome: it belongs to the incident that closed
    after it happened, not to a new incident that nothing would ever close."""
    store, in_order, t0 = _with_reference_in_order(job, event_fault)

    event_fault(store, job, "fault-1", t0)
    observe(store, job, kinds.RECOVERY_SUCCEEDED, t0 + timedelta(seconds=2), "podgroup", strategy="retry")
    observe(store, job, kinds.STRATEGY_CHOSEN, t0 + timedelta(seconds=1), "k8s-event", strategy="retry")

    assert Incident.objects.filter(job=job).count() == 1
    assert _incident_view(job) == _incident_view(in_order)
    incident = Incident.objects.get(job=job)
    assert incident.strategies == ["retry"] and incident.decide_ms == 1000 and incident.recover_ms == 1000

    # A strategy after the close is a new incident's (its fault's report has not come yet).
    observe(store, job, kinds.STRATEGY_CHOSEN, t0 + timedelta(seconds=40), "k8s-event", strategy="recover")
    assert Incident.objects.filter(job=job).count() == 2
    assert_gap_free(job)

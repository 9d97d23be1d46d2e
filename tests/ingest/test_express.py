"""A job's first fault report is stored on arrival, not after the reorder hold (``apps.ingest.express``).

kube-apiserver sends a watch bookmark about once a minute (``cacher.go``, ``defaultBookmarkFrequency``),
so a quiet stream holds every other stream's items for the whole hold. A first fault report cannot be
moved by anything older (it opens an incident of its own), so it goes at once; in order it is seen
again and only its cursor moves. A report of a job whose incident is open (or just closed) waits in
order: an older outcome still in flight could close that incident first.
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from apps.clusterd.client import DeviceFault, FaultSignal, NodeFault
from apps.events import kinds
from apps.events.models import Incident, JobEvent
from apps.ingest import applier as applier_module
from apps.ingest.applier import Applier
from apps.ingest.cursors import cursor_load
from apps.ingest.feed import Feed, SyncGate
from apps.ingest.items import CLUSTERD_SOURCE, Item, sources_of
from apps.jobs.models import Cluster, TrainingJob
from tests.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
HOLD_S = 30.0  # only a watermark (or the express path) may release an item in these tests


@pytest.fixture
def job(settings: Any) -> TrainingJob:
    settings.EVENTS_INGEST_REORDER_SECONDS = HOLD_S
    settings.EVENTS_INGEST_WARMUP_WINDOW_SECONDS = HOLD_S
    settings.EVENTS_INGEST_WARMUP_SECONDS = 0.0
    cluster = Cluster.objects.create(
        name=f"x-{uuid.uuid4().hex[:6]}", kubeconfig_path="/dev/null", namespaces=["team"]
    )
    return TrainingJob.objects.create(
        cluster=cluster, namespace="team", name="llama", uid=str(uuid.uuid4()), replicas={"Worker": 2}
    )


@pytest.fixture
def applier(job: TrainingJob, monkeypatch: pytest.MonkeyPatch) -> Iterator[Applier]:
    monkeypatch.setattr(applier_module.broadcast, "flush", lambda timeout=5.0: True)
    feed = Feed(queue.Queue(), threading.Event())
    applier = Applier(job.cluster, feed, SyncGate(), lease=None, lost=threading.Event(), db_retry_max=1.0)
    thread = threading.Thread(target=applier.run, daemon=True)
    thread.start()
    wait_for(lambda: applier.live, 10, "the applier past its warm-up")
    yield applier
    applier.halt.set()
    thread.join(10)


def fault_event(job: TrainingJob, rv: int, fault_id: str, code: str = "80E01801") -> Item:
    obj = {
        "metadata": {
            "name": f"llama.{rv}",
            "namespace": "team",
            "uid": str(uuid.uuid4()),
            "resourceVersion": str(rv),
        },
        "involvedObject": {"kind": "AscendJob", "namespace": "team", "name": "llama", "uid": job.uid},
        "reason": "FaultDetected",
        "type": "Warning",
        "message": f"node fault (code {code}, level RestartBusiness) on pod rank 1 [{fault_id}]",
        "count": 1,
        "lastTimestamp": timezone.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return Item("events:team", "events", "ADDED", obj, str(rv), timezone.now())


def fault_signal(job: TrainingJob, position: int) -> Item:
    device = DeviceFault(
        device_id="3",
        device_type="npu",
        codes=("80E01801",),
        level="RestartBusiness",
        fault_types=(),
        reasons=(),
    )
    signal = FaultSignal(
        uuid=str(uuid.uuid4()),
        job_id=job.uid,
        signal_type="fault",
        nodes=(
            NodeFault(
                node_name="node-1", node_ip="10.0.0.1", node_sn="", level="RestartBusiness", devices=(device,)
            ),
        ),
    )
    return Item(CLUSTERD_SOURCE, CLUSTERD_SOURCE, "SIGNAL", signal, str(position), timezone.now())


def streams_pass(applier: Applier, job: TrainingJob, version: int) -> None:
    """Every watched stream's bookmark at ``version``: what is older is due in order."""
    for source in sources_of(job.cluster):
        applier.feed.put(Item(source, source.split(":")[0], "BOOKMARK", {}, str(version), timezone.now()))


def detections(job: TrainingJob) -> int:
    return JobEvent.objects.filter(job=job, kind=kinds.FAULT_DETECTED).count()


# The applier counts a report stored on arrival (``expressed``) right after its transaction commits;
# a test that has just seen the stored rows may look before that line has run, so it waits for the
# count (a run on a loaded machine saw the rows, then ``expressed == 0``).
def test_a_first_fault_event_is_stored_on_arrival_and_once(job: TrainingJob, applier: Applier) -> None:
    started = time.monotonic()
    applier.feed.put(fault_event(job, 101, "fault-1"))
    wait_for(lambda: detections(job) == 1, 10, "the fault stored before the 30-s hold")
    assert time.monotonic() - started < 5
    wait_for(lambda: applier.expressed == 1, 5, "counted as stored on arrival")
    assert cursor_load(job.cluster, "events:team") == ""  # the cursor waits for the in-order pass

    # The other streams pass version 101: in order, the Event is recognised and its cursor moves.
    streams_pass(applier, job, 200)
    wait_for(lambda: cursor_load(job.cluster, "events:team") == "200", 10, "the cursor in order")
    assert detections(job) == 1 and Incident.objects.filter(job=job).count() == 1


def test_a_fault_of_a_job_with_an_open_incident_waits_for_order(job: TrainingJob, applier: Applier) -> None:
    applier.feed.put(fault_event(job, 101, "fault-1"))
    wait_for(lambda: detections(job) == 1, 10, "the first fault on arrival")
    # A second fault of another code while the first incident is open: an older outcome may still
    # be in flight on a quiet stream and close the first incident before it; so it waits.
    applier.feed.put(fault_event(job, 102, "fault-2", code="81078603"))
    time.sleep(1.5)
    assert detections(job) == 1 and applier.expressed == 1
    streams_pass(applier, job, 200)
    wait_for(lambda: detections(job) == 2, 10, "the second fault in order")


def test_a_job_whose_incident_just_closed_waits_for_order(job: TrainingJob, applier: Applier) -> None:
    """Within the late window an outcome still in flight would join the closed incident; a fault
    stored ahead of it would open a new one for the outcome to close instead."""
    now = timezone.now()
    Incident.objects.create(
        job=job,
        number=1,
        first_seq=1,
        last_seq=1,
        opened_at=now - timedelta(seconds=3),
        closed_at=now,
        outcome="recovered",
    )
    applier.feed.put(fault_event(job, 101, "fault-9"))
    time.sleep(1.5)
    assert detections(job) == 0 and applier.expressed == 0


def test_a_first_clusterd_fault_signal_is_stored_on_arrival(job: TrainingJob, applier: Applier) -> None:
    applier.feed.put(fault_signal(job, 150))
    wait_for(lambda: detections(job) == 1, 10, "ClusterD's report before the 30-s hold")
    wait_for(lambda: applier.expressed == 1, 5, "counted as stored on arrival")
    streams_pass(applier, job, 200)
    time.sleep(0.5)
    assert detections(job) == 1 and Incident.objects.filter(job=job).count() == 1


def test_nothing_skips_the_hold_during_a_take_overs_warm_up(
    job: TrainingJob, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.EVENTS_INGEST_WARMUP_SECONDS = HOLD_S  # the replay of a take-over: merged in order
    monkeypatch.setattr(applier_module.broadcast, "flush", lambda timeout=5.0: True)
    feed = Feed(queue.Queue(), threading.Event())
    applier = Applier(job.cluster, feed, SyncGate(), lease=None, lost=threading.Event(), db_retry_max=1.0)
    thread = threading.Thread(target=applier.run, daemon=True)
    thread.start()
    try:
        feed.put(fault_event(job, 101, "fault-1"))
        time.sleep(1.5)
        assert detections(job) == 0 and applier.expressed == 0
    finally:
        applier.halt.set()
        thread.join(10)


def test_a_replayed_fault_event_waits_for_order(job: TrainingJob, applier: Applier) -> None:
    """An Event from a backlog (its own time older than the late window) is not news."""
    old = fault_event(job, 101, "fault-1")
    old.obj["lastTimestamp"] = (timezone.now() - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    applier.feed.put(old)
    time.sleep(1.5)
    assert detections(job) == 0 and applier.expressed == 0


def test_a_fault_waits_while_an_older_report_of_its_job_is_held(job: TrainingJob, applier: Applier) -> None:
    """The short soak's failure: a backlog (a replay, a slow database) still holds an older fault of
    the job; the stored view of the job lags it, so a live fault of the same job that arrives
    meanwhile goes in order instead of opening an incident the older faults would then join."""
    old = fault_event(job, 40, "fault-old")
    old.obj["lastTimestamp"] = (timezone.now() - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    applier.feed.put(old)  # held: no stream passed version 40, and it is too old to go at once
    time.sleep(0.2)
    applier.feed.put(fault_event(job, 101, "fault-live", code="81078603"))
    time.sleep(1.5)
    assert detections(job) == 0 and applier.expressed == 0
    streams_pass(applier, job, 200)
    wait_for(lambda: detections(job) == 2, 10, "both faults in order")


def test_another_jobs_backlog_does_not_hold_a_first_fault(
    job: TrainingJob, applier: Applier, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A storm: the applier is seconds behind with other items (a slow database here); a job's
    first fault report does not wait for that backlog, only for its own job's older reports."""
    real_apply = Applier.apply_one

    def slow_apply(self: Applier, store: Any, item: Item) -> bool:
        time.sleep(0.4)  # a slow database: the backlog stays due for a while
        return real_apply(self, store, item)

    monkeypatch.setattr(Applier, "apply_one", slow_apply)
    for rv in range(40, 50):  # a backlog on one stream, due at once: every stream passed 50
        applier.feed.put(Item("podgroups:team", "podgroups", "BOOKMARK", {}, str(rv), timezone.now()))
    streams_pass(applier, job, 50)
    time.sleep(0.2)
    started = time.monotonic()
    applier.feed.put(fault_event(job, 101, "fault-1"))  # taken in after the first backlog item
    wait_for(lambda: detections(job) == 1, 10, "the fault ahead of the backlog")
    # The backlog takes 8 s (20 items at 0.4 s each); the fault waits for at most the item being stored.
    assert time.monotonic() - started < 2.0
    wait_for(lambda: applier.expressed == 1, 5, "counted as stored on arrival")

"""A job's ClusterD faults that cleared while no ingester listened do not hide its next fault.

ClusterD's fault stream sends, on subscribe, the current faults (clusterd-wire.md): the jobs that
have some, nothing about the others. The store diffs each job's signal against its stored fault
set, so a job whose "normal" signal was lost (drained unstored by a leader that lost its lease, or
sent while the stream was down) kept a stale set, and every later fault on the same device was
"not new": never detected from ClusterD. Seen in the suite's short soak (two jobs, 20 incidents
with no fault.detected, a leader that lost its lease mid-run). The follower now asks ClusterD about
every job it last knew with faults (``GetFaultMsgSignal``; a job without fault info is answered 200
with no signal: component/clusterd/pkg/application/fault/grpc_service.go:207-214) — since stop 36
beside the stream, after its opening snapshot, not before subscribing: ClusterD answers 10 questions
a second (grpc_service.go:46-48), and a fault that came and went while a hundred were asked was never
seen (the strict sustained benchmark's take-over lost 276 that way).
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from apps.clusterd.client import FaultSignal, FaultStream
from apps.events.models import Incident, ObservedObject
from apps.ingest.clusterd_faults import signal_state
from apps.ingest.runner import ClusterIngester
from apps.ingest.store import CLUSTERD_KIND
from apps.jobs.models import Cluster, TrainingJob
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.sim import clock_speed, create_job, make_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _clusterd_state(cluster: Cluster, uid: str) -> dict[str, str]:
    row = ObservedObject.objects.filter(cluster=cluster, kind=CLUSTERD_KIND, name=uid).first()
    return dict((row.state or {}).get("faults") or {}) if row is not None else {}


class FaultySignals:
    """A second subscriber to ClusterD's stream: the first faulty signal of one job."""

    def __init__(self, address: str, job_uid: str) -> None:
        self.job_uid = job_uid
        self.stream = FaultStream(address)
        self.seen: FaultSignal | None = None
        self.got = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for signal in self.stream:
            if signal.job_id == self.job_uid and signal.signal_type != "normal":
                self.seen = signal
                self.got.set()
                return

    def close(self) -> None:
        self.stream.close()
        self.thread.join(5)


def _start(cluster: Cluster) -> ClusterIngester:
    ingester = ClusterIngester(cluster)
    ingester.watch_timeout = 5
    ingester.start()
    wait_for(ingester.active.is_set, 15, "the ingester to lead")
    return ingester


def test_a_fault_set_that_cleared_unseen_is_asked_for_and_the_next_fault_is_detected(
    sim: SimCluster, kube: Kube, namespace: str, cluster_row: Cluster, private_broker: object
) -> None:
    for name in ("resub", "other"):
        create_job(kube, make_job(name, namespace=namespace, strategies="retry,recover"))
    ingester = _start(cluster_row)
    try:
        wait_for(lambda: TrainingJob.objects.filter(cluster=cluster_row).count() == 2, 30, "jobs adopted")
        job = TrainingJob.objects.get(cluster=cluster_row, name="resub")
        other = TrainingJob.objects.get(cluster=cluster_row, name="other")
        listener = FaultySignals(sim.grpc_address, job.uid)
        sim.inject_fault(namespace, "resub", rank=1, fault_type="uce", recovers=[True])
        try:
            assert listener.got.wait(30), "ClusterD's signal of the first fault"
        finally:
            listener.close()
        wait_for(
            lambda: Incident.objects.filter(job=job, outcome=Incident.Outcome.RECOVERED).count() == 1,
            30,
            "the first fault recovered",
        )
        wait_for(lambda: not _clusterd_state(cluster_row, job.uid), 30, "ClusterD's normal signal stored")
    finally:
        ingester.stop()
    assert "clusterd" in (Incident.objects.get(job=job).fault.get("sources") or [])
    # The state the store kept while the fault lasted, put back: as if the job's "normal" signal
    # had been drained unstored by a leader that lost its lease.
    assert listener.seen is not None
    stale: dict[str, Any] = signal_state(listener.seen)
    assert stale["faults"]
    ObservedObject.objects.filter(cluster=cluster_row, kind=CLUSTERD_KIND, name=job.uid).update(state=stale)

    # Another job is faulty while the ingester subscribes, so ClusterD's snapshot names that job
    # only: with no fault anywhere it would be one whole-cluster "normal", which clears every set.
    restarted: ClusterIngester | None = None
    try:
        with clock_speed(sim, 0.5):
            sim.inject_fault(namespace, "other", rank=1, fault_type="uce", recovers=[True])
            wait_for(lambda: other.uid in sim.clusterd.fault_snapshot(), 30, "the other job faulty")
            restarted = _start(cluster_row)
            wait_for(lambda: _clusterd_state(cluster_row, other.uid), 30, "the other job's faults stored")
            # Before any new fault: ClusterD was asked about the job and its stale set is gone.
            wait_for(lambda: not _clusterd_state(cluster_row, job.uid), 30, "the stale fault set cleared")
        sim.inject_fault(namespace, "resub", rank=1, fault_type="uce", recovers=[True])
        wait_for(
            lambda: Incident.objects.filter(job=job, outcome=Incident.Outcome.RECOVERED).count() == 2,
            30,
            "the second fault recovered",
        )
        second = Incident.objects.get(job=job, number=2)
        # ClusterD reported the second fault too (with the stale set it reported nothing new).
        wait_for(
            lambda: "clusterd" in (Incident.objects.get(pk=second.pk).fault.get("sources") or []),
            30,
            "ClusterD's report of the second fault",
        )
    finally:
        if restarted is not None:
            restarted.stop()


def test_a_fault_while_the_follower_asks_about_many_jobs_is_detected_at_once(
    sim: SimCluster, kube: Kube, namespace: str, cluster_row: Cluster, private_broker: object
) -> None:
    """150 jobs stored with ClusterD faults take 15 s of questions at ClusterD's 10 a second
    (grpc_service.go:46-48, advance_limiter.go:33-60); a new fault meanwhile is reported by the
    stream, which no longer waits for them."""
    create_job(kube, make_job("fresh", namespace=namespace, strategies="retry,recover"))
    stale_set = {"faults": {"node-gone|0|80E01801": "RestartBusiness"}}
    ObservedObject.objects.bulk_create(
        ObservedObject(
            cluster=cluster_row, kind=CLUSTERD_KIND, name=f"gone-{uuid.uuid4().hex}", state=stale_set
        )
        for _ in range(150)
    )
    begun = time.monotonic()
    ingester = _start(cluster_row)
    try:
        job = wait_for(
            lambda: TrainingJob.objects.filter(cluster=cluster_row, name="fresh").first(),
            30,
            "the job adopted",
        )
        wait_for(lambda: ingester.live, 30, "the ingester past its warm-up")
        # Well inside the 15 s of questions (before, the stream was not even open yet).
        assert time.monotonic() - begun < 10, "the set-up took too long to show anything"
        sim.inject_fault(namespace, "fresh", rank=1, fault_type="uce", recovers=[True])
        wait_for(
            lambda: any(
                "clusterd" in (incident.fault.get("sources") or [])
                for incident in Incident.objects.filter(job=job)
            ),
            5,
            "ClusterD's report of the fault",
        )
    finally:
        ingester.stop()

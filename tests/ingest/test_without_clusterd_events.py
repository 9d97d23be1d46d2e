"""What the product shows from a cluster whose ClusterD writes no Kubernetes Events — a real one.

Real ClusterD has no event recorder: ``component/clusterd`` only lists Events
(``component/clusterd/pkg/interface/kube/kube_client.go:198-213``). The built-in ClusterD writes
``FaultDetected``, ``StrategyChosen``, the outcomes and ``InitSuccess`` by default for the timeline's
narrative; here it writes none (``SimCluster(clusterd_events=False)``, ``SIM_CLUSTERD_EVENTS=0``), so
every incident must come from what a real cluster has: ClusterD's fault stream
(``GetFaultMsgSignal``/``SubscribeFaultMsgSignal``), ``reset-config-<job>`` (source facts D12) and the
PodGroup's ``ProcessRecoverStatus`` (controller.go:1400-1413, D1). The strategy tried is known from
its result; when it was decided is not observable there (platform mode observes it: the decider
answers). Nor does a fault signal name its fault: real ClusterD leaves each device's ``faultReason``
empty (component/clusterd/pkg/application/faultmanager/faultclusterprocess/
cluster_fault_processor.go:234), and so does this cluster, so reports are matched by signature and
time, never by an id.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from apps.events import kinds
from apps.events.models import Incident, JobEvent
from apps.ingest.runner import ClusterIngester
from apps.jobs.models import Cluster, TrainingJob
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.sim import create_job, event_reasons, make_job

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def strict_sim() -> Iterator[SimCluster]:
    sim = SimCluster(clock_speed=50, seed=5, clusterd_events=False).start()
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def cluster(strict_sim: SimCluster) -> Iterator[Cluster]:
    namespace = f"strict-{uuid.uuid4().hex[:6]}"
    assert strict_sim.clusterd is not None
    strict_sim.clusterd.kube.ensure_namespace(namespace)
    cluster = Cluster.objects.create(
        name=f"strict-{uuid.uuid4().hex[:6]}",
        kubeconfig_path=strict_sim.kubeconfig_path,
        clusterd_address=strict_sim.grpc_address,
        namespaces=[namespace],
    )
    yield cluster


@pytest.mark.parametrize(
    ("strategies", "fault_type", "recovers", "tried"),
    [
        ("retry,recover,dump", "uce", True, ["retry"]),
        ("recover", "normal", True, ["recover"]),
        ("retry,recover,dump", "uce", [False, True], ["retry", "recover"]),  # retry failed, then recover
    ],
)
def test_an_incident_from_real_sources_only(
    strict_sim: SimCluster,
    cluster: Cluster,
    strategies: str,
    fault_type: str,
    recovers: bool | list[bool],
    tried: list[str],
) -> None:
    assert strict_sim.clusterd is not None
    kube = strict_sim.clusterd.kube
    namespace = cluster.namespaces[0]
    live = create_job(kube, make_job("llama", namespace=namespace, workers=1, strategies=strategies))
    job = TrainingJob.objects.create(
        cluster=cluster,
        namespace=namespace,
        name="llama",
        uid=live["metadata"]["uid"],
        replicas={"Master": 1, "Worker": 1},
        npus_per_pod=8,
    )
    ingester = ClusterIngester(cluster)
    ingester.watch_timeout = 5
    ingester.start()
    try:
        wait_for(lambda: ingester.live, 30, "the ingester past its warm-up")
        strict_sim.inject_fault(namespace, "llama", rank=1, fault_type=fault_type, recovers=recovers)
        incident = wait_for(
            lambda: Incident.objects.filter(job=job).exclude(closed_at=None).first(),
            60,
            "the incident closed",
        )
    finally:
        ingester.stop()
    clusterd_reasons = {"InitSuccess", "FaultDetected", "StrategyChosen", "RecoverSucceeded", "GlobalFault"}
    assert not clusterd_reasons & set(event_reasons(kube, live)), "the cluster wrote ClusterD Events"
    stored = {event.kind: event.source for event in JobEvent.objects.filter(job=job)}
    assert stored[kinds.FAULT_DETECTED] == "clusterd"  # the fault stream
    (detected,) = JobEvent.objects.filter(job=job, kind=kinds.FAULT_DETECTED)
    assert "fault_reasons" not in detected.data  # faultReason empty, as from a real ClusterD
    assert incident.fault["fault_ids"] == []
    assert stored[kinds.TRAINING_STOPPED] == "reset-config"
    assert stored[kinds.RECOVERY_SUCCEEDED] == "podgroup"  # ProcessRecoverStatus=<strategy>-success
    assert kinds.STRATEGY_CHOSEN not in stored
    assert Incident.objects.filter(job=job).count() == 1
    assert incident.outcome == "recovered"
    assert incident.strategies == tried  # known from their results
    assert incident.decided_at is None and incident.decide_ms is None  # not observable here
    assert incident.detect_ms is not None and incident.recover_ms is not None

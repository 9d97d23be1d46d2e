"""Every source, driven through the simulator, gives the expected typed events and incident, per path.

The ingester runs in-process (its own threads and database connections) against the simulated
cluster over HTTP and its ClusterD over gRPC; the test only injects faults and reads the database.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from apps.decisions.watcher import PodGroupWatcher
from apps.events import kinds
from apps.events.models import Incident, JobEvent, RestartBudget
from apps.ingest.runner import ClusterIngester
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.events import assert_gap_free, closed_incidents, job_row, kinds_of
from tests.support.sim import create_job, make_job

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass(frozen=True)
class Path:
    """One strategy path: the job's policy, the fault, and what must come out of it."""

    name: str
    strategies: str
    fault_type: str
    recovers: list[bool]
    must_include: list[str]  # kinds, in this relative order
    strategies_tried: list[str] | None  # None: not this test's business (decided elsewhere)
    outcome: str | None
    annotations: dict[str, str] = field(default_factory=dict)
    decider: bool = False  # platform mode: ``manage.py decide`` (its one observer) answers ClusterD
    sources: frozenset[str] = frozenset()  # sources of stored events
    fault_sources: frozenset[str] = frozenset()  # sources that reported the fault (merged into one)
    in_incident: frozenset[str] = frozenset()  # decision kinds attached to the incident


PATHS = [
    Path(
        "retry-success",
        "retry,recover,dump",
        "uce",
        [True],
        [kinds.FAULT_DETECTED, kinds.STRATEGY_CHOSEN, kinds.RECOVERY_SUCCEEDED],
        ["retry"],
        Incident.Outcome.RECOVERED,
        sources=frozenset({"k8s-event", "podgroup"}),
        # No reset.json fault list on the retry path: notifyFaultForRetryFaultCase sends the signal
        # without writing one (component/clusterd/pkg/application/recover/controller.go:870-886).
        fault_sources=frozenset({"clusterd", "k8s-event"}),
    ),
    Path(
        "recover-after-retry-fails",
        "retry,recover,dump",
        "uce",
        [False, True],
        [
            kinds.FAULT_DETECTED,
            kinds.STRATEGY_CHOSEN,
            kinds.RECOVERY_FAILED,
            kinds.STRATEGY_CHANGED,
            kinds.RECOVERY_SUCCEEDED,
        ],
        ["retry", "recover"],
        Incident.Outcome.RECOVERED,
    ),
    Path(
        "dump-exit-reschedule",
        "dump",
        "normal",
        [True],
        [
            kinds.FAULT_DETECTED,
            kinds.STRATEGY_CHOSEN,
            kinds.DUMP_SAVED,
            kinds.TRAINING_EXITED,
            kinds.JOB_RESCHEDULED,
        ],
        # Issue 13: after dump ClusterD sends dump-exit, it does not choose exit (controller.go:1446-1458).
        ["dump", "job-rescheduling"],
        Incident.Outcome.RESCHEDULED,
        sources=frozenset({"reschedule-reason", "ascendjob"}),
    ),
    Path(
        "platform-decision",
        "retry,recover,dump",
        "uce",
        [True],
        # The answer (and so the outcome) is apps.decisions' rule evaluation: retry by rule when it
        # answers, exit → rescheduling when ClusterD times out (code 509). Either way the question
        # and the answer belong to the incident. The fault (stored by the ingester) and the question
        # (stored by ``decide``) come from two processes: their relative order is not defined.
        [kinds.DECISION_REQUESTED],
        None,
        None,
        annotations={"ProcessRecoverStrategy": "retry"},  # a standing answer, else no question (508)
        decider=True,
        in_incident=frozenset({kinds.DECISION_REQUESTED}),
    ),
]


@pytest.fixture
def decider() -> Iterator[Callable[[ClusterIngester], None]]:
    """``manage.py decide``'s PodGroup watcher in a thread, for the paths that need an answer."""
    running: list[tuple[PodGroupWatcher, threading.Thread]] = []

    def start(ingester: ClusterIngester) -> None:
        watcher = PodGroupWatcher(ingester.cluster, watch_timeout=5)
        thread = threading.Thread(target=watcher.run, daemon=True)
        thread.start()
        running.append((watcher, thread))

    yield start
    for watcher, thread in running:
        watcher.stop()
        thread.join(10)


def in_order(sequence: list[str], wanted: list[str]) -> bool:
    it = iter(sequence)
    return all(any(kind == seen for seen in it) for kind in wanted)


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_strategy_path(
    path: Path,
    sim: SimCluster,
    kube: Kube,
    namespace: str,
    ingester: ClusterIngester,
    decider: Callable[[ClusterIngester], None],
) -> None:
    if path.decider:
        decider(ingester)
    name = f"job-{path.name}"[:40]
    create_job(
        kube, make_job(name, namespace=namespace, strategies=path.strategies, annotations=path.annotations)
    )
    job = job_row(ingester.cluster, namespace, name)
    sim.inject_fault(namespace, name, rank=1, fault_type=path.fault_type, recovers=path.recovers)
    assert sim.wait_idle(30)
    try:
        incident = wait_for(
            lambda: next(iter(closed_incidents(job)), None), 15, f"{path.name}: incident closed"
        )
    except AssertionError:
        pytest.fail(
            f"{path.name}: no incident closed; stored {kinds_of(job)}, incidents "
            f"{[i.as_dict() for i in Incident.objects.filter(job=job)]}"
        )
    try:
        wait_for(lambda: in_order(kinds_of(job), path.must_include), 10, f"{path.name}: {path.must_include}")
    except AssertionError:
        pytest.fail(f"{path.name}: wanted {path.must_include} in order, stored {kinds_of(job)}")
    seen = kinds_of(job)
    incident.refresh_from_db()
    if path.outcome is not None:
        assert incident.outcome == path.outcome, incident.as_dict()
    if path.strategies_tried is not None:
        assert incident.strategies == path.strategies_tried, incident.as_dict()
    assert path.in_incident <= {d["kind"] for d in incident.decisions}, incident.as_dict()
    assert incident.ranks == [8] and incident.nodes, incident.as_dict()
    assert incident.opened_at <= incident.closed_at
    assert None not in (incident.decide_ms, incident.recover_ms), incident.as_dict()
    # One fault, one incident, one fault.detected however many sources reported it.
    assert Incident.objects.filter(job=job).count() == 1, [
        i.as_dict() for i in Incident.objects.filter(job=job)
    ]
    assert seen.count(kinds.FAULT_DETECTED) == 1, seen
    assert_gap_free(job)
    sources = {
        s
        for data in JobEvent.objects.filter(job=job).values_list("data", flat=True)
        for s in data.get("sources", [])
    }
    assert path.sources <= sources, sources
    assert path.fault_sources <= set(incident.fault["sources"]), incident.fault
    fault = JobEvent.objects.get(job=job, kind=kinds.FAULT_DETECTED)
    assert fault.data.get("code", "") == ("80E01801" if path.fault_type == "uce" else "")


def test_two_faults_two_incidents_and_budget(
    sim: SimCluster, kube: Kube, namespace: str, ingester: ClusterIngester
) -> None:
    create_job(kube, make_job("budget", namespace=namespace, strategies="dump", backoff_limit=2))
    job = job_row(ingester.cluster, namespace, "budget")
    for attempt in range(2):
        sim.inject_fault(namespace, "budget", rank=1, fault_type="normal", recovers=[True])
        assert sim.wait_idle(30)
        wait_for(lambda n=attempt: len(closed_incidents(job)) == n + 1, 15, f"incident {attempt + 1} closed")
    incidents = closed_incidents(job)
    assert [i.number for i in incidents] == [1, 2]
    assert all(i.outcome == Incident.Outcome.RESCHEDULED for i in incidents)
    budget = wait_for(
        lambda: RestartBudget.objects.filter(job=job, reschedules_used=2).first(), 10, "budget used"
    )
    assert budget.backoff_limit == 2 and budget.backoff_left == 0 and budget.exhausted
    assert_gap_free(job)


def test_validation_warning_becomes_job_warning(
    kube: Kube, namespace: str, ingester: ClusterIngester
) -> None:
    manifest: dict[str, Any] = make_job("broken", namespace=namespace)
    manifest["metadata"]["labels"]["framework"] = "caffe"  # the operator refuses it: InvalidFramework
    kube.custom.create_namespaced_custom_object("mindxdl.gitee.com", "v1", namespace, "ascendjobs", manifest)
    job = job_row(ingester.cluster, namespace, "broken")
    event = wait_for(
        lambda: JobEvent.objects.filter(job=job, kind=kinds.JOB_WARNING).first(), 10, "job.warning stored"
    )
    assert event.data["reason"].startswith("Invalid") and event.severity == "warning"

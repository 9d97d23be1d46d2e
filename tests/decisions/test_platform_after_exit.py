"""Platform mode survives an exit decision (issue #25 item 3; mindcluster-source-facts.md D1, D2, D11).

The real ClusterD writes no ``ProcessRecoverStatus`` after an ``exit`` answer: NotifyExitSuccessEvent →
``handleDecideExitStrategy`` only returns CheckResultFinishEvent
(``component/clusterd/pkg/application/recover/rules.go:202-203``, ``controller.go:1804-1807``). It never
clears the platform keys either (``fault_recover_platform_plugin.go:60-105``), and refuses its next
question at once while ``ProcessConfirmFault`` still holds something (509, ``:69-72``). What it does
write after an exit, in platform mode (``rules.go:236-275``): ListenScheduleResult succeeds at once
(``controller.go:1810-1813``) → reset.json ``restartAllProcess`` (``controller.go:1829-1838``) → no 60 s
wait (``controller.go:1867-1870``) → FaultClear (``controller.go:692-701``) → FaultRetry: label
``process-recover-enable=pause``, dump-exit, ≤135 s for the job, label ``on`` (``controller.go:1534-1568``).
The decider takes the label's ``pause`` as the end of the decision and clears the question.

Two tests: the built-in cluster end to end (real worker, ingester and decider), and a scripted ClusterD
that writes the PodGroup keys in the source's order and checks, as the real one does, that its previous
question was cleared before it asks again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from apps.decisions.models import Decision
from apps.decisions.services import FAULT_RETRY
from apps.events.models import Incident
from apps.ingest.runner import ClusterIngester
from apps.jobs.models import TrainingJob
from mindcluster import keys as c
from simcluster.runtime import SimCluster
from tests.decisions.platform_fixtures import (
    GAVE_UP,
    POLICY,
    Platform,
    clusterd_reasons,
    platform,
    podgroup_of,
)
from tests.support import wait_for

__all__ = ["platform"]  # fixtures used by name

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow(seconds=20)]

# Every normal fault is answered exit; the standing answer stays the policy's default (recover).
EXIT_POLICY: dict[str, Any] = {
    **POLICY,
    "decision_rules": [{"match": {"fault_type": ["normal"]}, "strategy": "exit"}],
}
SECOND_FAULT_AFTER_S = 60.0  # simulated seconds from the end of the first recovery to the second fault


@pytest.fixture(scope="module")
def sim() -> Iterator[SimCluster]:
    # 1 simulated second = 20 ms: the 60 s between the faults is 1.2 s, ClusterD's 300 s limit 6 s.
    cluster = SimCluster(clock_speed=50, seed=25).start()
    yield cluster
    cluster.stop()


def _custom(sim: SimCluster) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(k8s_config.new_client_from_config(config_file=sim.kubeconfig_path))


@pytest.fixture
def exit_job(platform: Platform) -> TrainingJob:
    """A running platform-mode job whose normal faults are answered exit, with the decider and a worker."""
    return platform.running_job(EXIT_POLICY)


def test_exit_then_a_second_fault_60s_later_is_answered(sim: SimCluster, exit_job: TrainingJob) -> None:
    job = exit_job
    ingester = ClusterIngester(job.cluster)
    ingester.watch_timeout = 5
    ingester.start()
    try:
        sim.inject_fault("default", job.name, rank=1, fault_type="normal", recovers=True)
        first = wait_for(
            lambda: Decision.objects.filter(job=job, state="written").first(), 10, "the exit answer written"
        )
        assert first.strategy == "exit"
        # The first recovery (exit → restartAllProcess → FaultClear → FaultRetry with the pods
        # rescheduled) ends first: a fault during it is merged into it, not asked about
        # (fault_recover_service.go:165, controller.go:474-479). Then, 60 s later, the next fault.
        assert sim.wait_idle(20)
        sim.clock.sleep(SECOND_FAULT_AFTER_S)
        sim.inject_fault("default", job.name, rank=2, fault_type="normal", recovers=True)
        done = wait_for(
            lambda: (
                (rows := list(Decision.objects.filter(job=job, state="completed").order_by("id")))
                and len(rows) == 2
                and rows
            ),
            30,
            "both decisions completed",
        )
        assert sim.wait_idle(30)
        reasons = clusterd_reasons(sim, job)
        assert not GAVE_UP & set(reasons), reasons  # no 508, no 509
        assert [d.strategy for d in done] == ["exit", "exit"]
        # Ended by FaultRetry's label, not by a status ClusterD never writes (D1).
        assert [d.outcome for d in done] == [FAULT_RETRY, FAULT_RETRY]
        assert done[1].confirm_fault and done[1].written_at is not None
        # The built-in ClusterD in the source's order after exit (rules.go:236-275), twice.
        tail = [r for r in reasons if r in ("RestartAllProcess", "FaultClear", "ProcessRecoverPaused")]
        assert tail == ["RestartAllProcess", "FaultClear", "ProcessRecoverPaused"] * 2
        assert "ScheduleTimeout" not in reasons  # platform mode: no schedule wait (controller.go:1810-1813)
        annotations = podgroup_of(sim, job)["metadata"]["annotations"]
        assert annotations.get(c.ANNOTATION_RECOVER_STATUS, "") != "exit-completed"
        assert not annotations.get(c.ANNOTATION_CONFIRM_FAULT)
        # The ingester saw two faults, one incident each.
        wait_for(lambda: Incident.objects.filter(job=job).count() == 2, 15, "two incidents")
    finally:
        ingester.stop()


class ScriptedClusterD:
    """The PodGroup writes of the real ClusterD for one fault, in its order (platform mode, exit)."""

    def __init__(self, sim: SimCluster, job: TrainingJob) -> None:
        self.custom = _custom(sim)
        self.job = job
        self.name = f"{job.name}-{job.uid}"

    def podgroup(self) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(
            c.PODGROUP_GROUP, c.PODGROUP_VERSION, self.job.namespace, c.PODGROUP_PLURAL, self.name
        )

    def patch(self, meta: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            c.PODGROUP_GROUP,
            c.PODGROUP_VERSION,
            self.job.namespace,
            c.PODGROUP_PLURAL,
            self.name,
            {"metadata": meta},
        )

    def annotations(self) -> dict[str, str]:
        return dict(self.podgroup()["metadata"].get("annotations") or {})

    def fault(self, confirm: str) -> str:
        """One fault; returns the answer read, or the code ClusterD would give up with."""
        standing = self.annotations().get(c.ANNOTATION_PLATFORM_STRATEGY, "").strip().strip(",")
        if standing not in ("retry", "recover", "dump"):  # plat:30-57
            return "508"
        if self.annotations().get(c.ANNOTATION_CONFIRM_FAULT):  # plat:69-72
            return "509"
        self.patch({"annotations": {c.ANNOTATION_CONFIRM_FAULT: confirm}})  # plat:60-83
        # plat:108-122: the key must exist
        wait_for(lambda: c.ANNOTATION_RESULT_FAULT in self.annotations(), 10, "ProcessResultFault")
        answer = self.annotations()[c.ANNOTATION_PLATFORM_STRATEGY].strip().strip(",")  # :36-38
        if answer == "exit":
            # rules.go:202-203 → 236-275: no status; (reset.json restartAllProcess and clear, not on the
            # PodGroup) → FaultRetry: label pause, the job runs, label on (controller.go:1534-1568).
            self.patch({"labels": {c.LABEL_PROCESS_RECOVER_ENABLE: c.PROCESS_RECOVER_PAUSE}})
            self.patch({"labels": {c.LABEL_PROCESS_RECOVER_ENABLE: "on"}})
        return answer


def test_a_scripted_clusterd_in_the_source_order_is_never_refused(
    sim: SimCluster, exit_job: TrainingJob
) -> None:
    job = exit_job
    # The built-in ClusterD stays out of it: the fault never goes through its queue, only these writes.
    clusterd = ScriptedClusterD(sim, job)
    assert clusterd.fault("8:1") == "exit"
    # FaultRetry sleeps SleepSecondBeforeCheckPGRunning = 5 s before it first checks the job
    # (controller.go:1544-1546, const.go:140-141): the earliest the next fault can be asked is 5 s
    # after the label turned pause, so the decider has at most that long to clear the question.
    wait_for(lambda: not clusterd.annotations().get(c.ANNOTATION_CONFIRM_FAULT), 5, "question cleared")
    assert clusterd.fault("16:1") == "exit"
    rows = wait_for(
        lambda: (
            (r := list(Decision.objects.filter(job=job).order_by("id"))) and r[-1].state == "written" and r
        ),
        10,
        "the second answer written",
    )
    assert [(d.state, d.outcome) for d in rows] == [("completed", FAULT_RETRY), ("written", "")]
    assert rows[0].context.get("recover_label") == "on"

"""The simulated ClusterD on the paths of source facts §6 that one fault event of the conformance table
cannot show: what a path leaves behind for the next fault, and what it writes on the way. Paths are
in Ascend/mind-cluster at 22bb3d98 under component/clusterd/pkg/application/recover/ unless given."""

from __future__ import annotations

from typing import Any

from mindcluster import keys as k
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.sim import create_job, event_reasons, make_job, podgroup_of


def _pods(kube: Kube, job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    meta = job["metadata"]
    return {p["metadata"]["name"]: p for p in kube.list_job_pods(meta["namespace"], meta["name"])}


def test_a_failed_hot_switch_turns_sub_health_to_ignore_for_the_next_fault(
    sim: SimCluster, kube: Kube
) -> None:
    job = create_job(
        kube, make_job("hp-hotswitch", strategies=None, labels={"subHealthyStrategy": "hotSwitch"})
    )
    uid = job["metadata"]["uid"]
    wait_for(lambda: sim.clusterd.init_snapshot(uid), what="Init accepted through hotSwitch (svc:550-555)")
    sim.clusterd.spare_resources = False  # no node for the backup pod
    try:
        sim.inject_fault("default", "hp-hotswitch", rank=1, level="SubHealthFault", recovers=True)
        assert sim.wait_idle(20)
    finally:
        sim.clusterd.spare_resources = True
    # hotSwitch signal, the fault pod annotated for a backup pod (hot_switch_controller.go:36-59), the
    # operator's backup pod never runs → stop switch (:61-95), subHealthyStrategy → ignore (:217-225);
    # cleanStateWhenFailed clears the fault pod's flow annotations and has the operator delete the
    # backup pod (hot_switch_controller.go:226-256, ascend-operator ascendjob_controller.go:688-691).
    pods = _pods(kube, job)
    worker = pods["hp-hotswitch-worker-0"]
    for key in ("inHotSwitchFlow", "needOperatorOpe", "backupNewPodName"):
        assert key not in worker["metadata"].get("annotations", {})
    assert not [name for name in pods if "-hot-" in name]
    reasons = event_reasons(kube, job)
    assert (
        reasons.index("HotSwitch")
        < reasons.index("HotSwitchStopped")
        < reasons.index("SubHealthyStrategyIgnore")
    )
    snapshot = sim.clusterd.init_snapshot(uid)
    assert snapshot is not None and snapshot.hot_switch_off
    # The next sub-health fault meets the ignore snapshot: skipped (fault_recover_service.go:343-346).
    sim.inject_fault("default", "hp-hotswitch", rank=1, level="SubHealthFault", recovers=True)
    assert sim.wait_idle(20)
    assert "FaultIgnored" in event_reasons(kube, job)
    assert k.ANNOTATION_RECOVER_STATUS not in (podgroup_of(kube, job) or {})["metadata"].get(
        "annotations", {}
    )


def test_a_refused_init_is_retried_when_the_podgroup_changes(sim: SimCluster, kube: Kube) -> None:
    # TaskD retries Init 1 s after a failure (taskd/go/framework_backend/manager/manager.go:468-492) and a
    # refused Init records nothing (fault_recover_service.go:579-585).
    job = create_job(kube, make_job("hp-init-retry", strategies=None))
    uid = job["metadata"]["uid"]
    refused = wait_for(lambda: sim.clusterd.init_record(uid), what="the first Init")
    assert refused.code == 403
    pg = podgroup_of(kube, job)
    assert pg is not None
    kube.patch_podgroup(
        "default",
        pg["metadata"]["name"],
        {
            "metadata": {
                "labels": {"process-recover-enable": "on"},
                "annotations": {"recover-strategy": "recover"},
            }
        },
    )
    accepted = wait_for(lambda: sim.clusterd.init_snapshot(uid), what="Init retried and accepted")
    assert "recover" in accepted.configured
    assert "InitSuccess" in [e["reason"] for e in kube.list_events("default", pg["metadata"]["name"])]


def test_dump_for_fault_sends_save_and_exit_without_stopping_or_asking(sim: SimCluster, kube: Kube) -> None:
    # A software fault makes the job UnHealthy (fault_recover_service.go:788-791); dump first →
    # DumpForFaultEvent (controller.go:676-681): saveAndExit with the fault list in reset.json, no
    # FaultFlushing, stopTrain, globalFault or strategy report (controller.go:716-747, rules.go:155-156).
    job = create_job(kube, make_job("hp-dump-for-fault", strategies="dump"))
    signals: list[dict[str, Any]] = []
    sub = sim.clusterd.hub.subscribe(f"process:{job['metadata']['uid']}")
    try:
        sim.inject_fault("default", "hp-dump-for-fault", rank=1, fault_type="normal", recovers=True)
        assert sim.wait_idle(20)
        while (item := sub.get(timeout=0.5)) is not None:
            signals.append(item)
    finally:
        sub.close()
    kinds = [s["signalType"] for s in signals]
    assert kinds[0] == "saveAndExit" and "stopTrain" not in kinds and "globalFault" not in kinds
    annotations = (podgroup_of(kube, job) or {})["metadata"].get("annotations", {})
    assert annotations.get(k.ANNOTATION_RECOVER_STATUS) == "dump-success"
    assert "TaskDStrategies" not in event_reasons(kube, job)


def test_a_sub_health_fault_during_a_recovery_is_dropped(sim: SimCluster, kube: Kube) -> None:
    # While a recovery of an UnHealthy job runs, SubHealthFault entries are dropped
    # (fault_recover_service.go:302-304); the cluster still reports the fault when it happens.
    job = create_job(
        kube, make_job("hp-sub-during", annotations={k.ANNOTATION_PLATFORM_STRATEGY: "none"})
    )  # no standing answer: the recovery waits 300 s (simulated) for one, then 508
    sim.inject_fault("default", "hp-sub-during", rank=1, fault_type="node", recovers=True)
    wait_for(lambda: "FaultDetected" in event_reasons(kube, job), what="the first fault reported")
    sim.inject_fault("default", "hp-sub-during", rank=1, level="SubHealthFault", recovers=True)
    assert sim.wait_idle(20)
    reasons = event_reasons(kube, job)
    assert reasons.count("FaultDetected") == 2 and "FaultIgnored" in reasons
    assert "FaultMerged" not in reasons

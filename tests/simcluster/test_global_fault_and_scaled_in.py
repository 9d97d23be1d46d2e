"""Three ClusterD paths of issue #25, read from Ascend/mind-cluster 22bb3d98 (component/clusterd/pkg/
application/recover/ unless a path says otherwise):

- RestartFaultProcess of the fault list written to reset.json at globalFault (controller.go:870-886,
  960-966, 1001-1031, 2102-2152; v7.3.0 controller.go:994-1013 writes no list when it is true);
- a fault while the job runs scaled in (rules.go:322-323): straight to stopTrain, then dump or exit
  (controller.go:1183-1188, 1153-1158);
- hotSwitch with fault-scheduling off: Volcano never deletes the old pod
  (ascend-for-volcano/internal/rescheduling/reschedule.go:108-114), ClusterD waits without a timeout
  (rules.go:129-130).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from mindcluster import clusterd as engine
from mindcluster import faults as vocab
from mindcluster.clusterd import EngineInput, RankFault, RecoveryPolicy, StepKind
from simcluster.injector import FaultSpec
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.sim import create_job, event_reasons, make_job, reset_json_writes


def policy(strategies: str, **labels: str) -> RecoveryPolicy:
    return RecoveryPolicy.from_podgroup(
        {"process-recover-enable": "on", "fault-scheduling": "grace", **labels},
        {"recover-strategy": strategies},
    )


def soft(pod: int) -> RankFault:
    return RankFault(rank=pod * 8, pod_rank=pod, node=f"n{pod}")


def hard(pod: int, level: str) -> RankFault:
    return RankFault(rank=pod * 8, pod_rank=pod, node=f"n{pod}", level=level)


ALL = frozenset({"retry", "recover", "dump", "downgrade"})


def rfp(strategies: str, *faults: RankFault, **kw: object) -> bool | None:
    inputs = EngineInput(policy=policy(strategies), supported=ALL, faults=faults)
    return engine.global_fault_restart_fault_process(replace(inputs, **kw))  # type: ignore[arg-type]


def test_restart_fault_process_at_global_fault() -> None:
    in_place = "recover-in-place,recover"
    # updateRestartFaultProcess (controller.go:2138-2145): a pod that can restart in place → true.
    assert rfp(in_place, soft(1)) is True
    assert rfp(in_place, hard(1, vocab.RESTART_REQUEST)) is True
    # controller.go:2146-2149: only software faults on several pods → false.
    assert rfp(in_place, soft(0), soft(1)) is False
    # v26 preExit adds the pod's software fault, but SeparateNPU cannot restart in place → false.
    assert rfp(in_place, hard(1, vocab.SEPARATE_NPU)) is False
    # Pods enter the list only while the live PodGroup allows in-place (controller.go:2102-2121).
    assert rfp("recover", soft(1)) is False
    assert rfp("recover", soft(1), live_in_place=True) is True
    assert rfp(in_place, soft(1), live_in_place=False) is False
    # Retry faults: notifyFaultForRetryFaultCase writes no list (controller.go:870-886) ...
    uce = RankFault(rank=8, pod_rank=1, node="n1", fault_type=vocab.FAULT_UCE, level=vocab.RESTART_BUSINESS)
    assert rfp("retry," + in_place, uce) is None
    # ... except on the globalFault after a retry failed with 405, where they count as normal.
    inputs = EngineInput(policy=policy("retry," + in_place), supported=ALL, faults=(uce,))
    assert engine.global_fault_restart_fault_process(inputs, reflush=True) is True
    # v7.3.0 controller.go:994-1013: the list is written only when the value is false.
    assert rfp(in_place, soft(1), release="7.3") is None
    assert rfp(in_place, soft(1), hard(0, vocab.SEPARATE_NPU), release="7.3") is False
    # Dump-for-fault never reaches globalFault (controller.go:676-681).
    assert rfp("dump", soft(1)) is None


def test_a_fault_while_scaled_in_goes_straight_to_stop_train_then_dump_or_exit() -> None:
    first = (hard(1, vocab.SEPARATE_NPU),)
    base = EngineInput(
        policy=policy("retry,recover,elastic-training,dump"),
        supported=ALL,
        faults=first,
        spare_resources=False,
    )
    steps = engine.plan(base, lambda s, a: True)
    # recover waits for the new pods in vain (no spare resources), then scale-in (controller.go:1764-1773).
    assert engine.chosen_strategies(steps) == ["recover", "elastic-training"] and engine.ends_scaled_in(steps)
    scale_only = replace(base, policy=policy("elastic-training,dump"))
    steps = engine.plan(scale_only, lambda s, a: True)
    assert engine.ends_scaled_in(steps)
    # Second fault: rank-0 UCE. No retry, no recover, no second scale-in: dump (controller.go:1183-1188).
    uce0 = RankFault(rank=0, pod_rank=0, node="n0", fault_type=vocab.FAULT_UCE, level=vocab.RESTART_BUSINESS)
    second = replace(base, faults=(uce0,), scaled_in=first)
    steps = engine.plan(second, lambda s, a: True)
    assert engine.chosen_strategies(steps) == ["dump"]
    # The scale-in's pod is still among the faulty ones (controller.go:204-219, 286-290).
    dump = next(s for s in steps if s.kind == StepKind.JOB_RESCHEDULE)
    assert dump.budget_change == -1
    # No dump configured → exit.
    no_dump = replace(second, policy=policy("recover,elastic-training"))
    assert engine.chosen_strategies(engine.plan(no_dump, lambda s, a: True)) == ["exit"]
    # Platform mode: no standing-answer wait (controller.go:664-674 is skipped), so no standing answer
    # is no 508; the answer read at globalFault decides dump.
    platform = RecoveryPolicy.from_podgroup(
        {"process-recover-enable": "on", "fault-scheduling": "grace"},
        {"recover-strategy": "elastic-training,dump", "ProcessRecoverStrategy": ""},
    )
    plat = replace(second, policy=platform, platform_standing="", platform_choice="dump")
    steps = engine.plan(plat, lambda s, a: True)
    assert StepKind.PLATFORM_TIMEOUT not in [s.kind for s in steps]
    assert engine.chosen_strategies(steps) == ["dump"]
    # Without the platform's result the handshake at globalFault fails: 509, FaultRetry (rules.go:184-185).
    failed = engine.plan(replace(plat, platform_timed_out=True), lambda s, a: True)
    assert [s.code for s in failed if s.kind == StepKind.PLATFORM_TIMEOUT] == [509]
    assert engine.chosen_strategies(failed) == []


def test_hot_switch_with_fault_scheduling_off_never_finishes() -> None:
    sub = (hard(1, vocab.SUB_HEALTH_FAULT),)
    on = RecoveryPolicy.from_podgroup({"subHealthyStrategy": "hotSwitch", "fault-scheduling": "grace"}, {})
    off = RecoveryPolicy.from_podgroup({"subHealthyStrategy": "hotSwitch", "fault-scheduling": "off"}, {})
    kinds_on = [
        s.kind for s in engine.plan(EngineInput(policy=on, supported=ALL, faults=sub), lambda s, a: 0)
    ]
    assert StepKind.DONE in kinds_on and "migration" in engine.chosen_strategies(
        engine.plan(EngineInput(policy=on, supported=ALL, faults=sub), lambda s, a: 0)
    )
    steps = engine.plan(EngineInput(policy=off, supported=ALL, faults=sub), lambda s, a: 0)
    assert [s.kind for s in steps][-2:] == [StepKind.DELETE_OLD_POD, StepKind.HOT_SWITCH_STUCK]
    assert engine.chosen_strategies(steps) == []
    # The stop-job path (pause result names only exit): the rank-0 pod is annotated, nobody deletes it.
    steps = engine.plan(EngineInput(policy=off, supported=frozenset(), faults=sub), lambda s, a: 0)
    assert StepKind.JOB_RESCHEDULE not in [s.kind for s in steps]


def test_the_simulated_clusterd_writes_restart_fault_process_true_for_in_place(
    sim: SimCluster, kube: Kube, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A software fault on one pod, recover-in-place configured: the globalFault list carries
    # RestartFaultProcess=true (controller.go:960-966, 2138-2152), as does handleRestartFaultProcess's.
    create_job(kube, make_job("rfp-sim", strategies="recover-in-place,recover"))
    docs = reset_json_writes(sim, monkeypatch, "rfp-sim")
    assert sim.clusterd is not None
    # A business-process fault (no chip level) goes in as the conformance runner sends it.
    sim.clusterd.inject(
        FaultSpec(namespace="default", job="rfp-sim", rank=1, kind="normal", level="", recovers=True)
    )
    assert sim.wait_idle(20)
    with_ranks = [d for d in docs if d["RankList"]]
    assert with_ranks and all(d["RestartFaultProcess"] is True for d in with_ranks)


def test_the_simulated_clusterd_handles_a_fault_while_scaled_in(
    sim: SimCluster, kube: Kube, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Scale-in, then a rank-0 fault: no FaultFlushing write (rules.go:322-323 skips
    # handleNotifyWaitFaultFlushing), the globalFault list holds the scale-in's ranks too
    # (controller.go:204-219), and dump is chosen (controller.go:1183-1188).
    job = make_job("si-sim", strategies="elastic-training,dump", labels={"fault-scheduling": "off"})
    create_job(kube, job)
    assert sim.clusterd is not None
    sim.inject_fault("default", "si-sim", rank=1, fault_type="normal", level="SeparateNPU", recovers=True)
    assert sim.wait_idle(20)
    docs = reset_json_writes(sim, monkeypatch, "si-sim")
    sim.inject_fault("default", "si-sim", rank=0, fault_type="normal", level="SeparateNPU", recovers=True)
    assert sim.wait_idle(20)
    assert not any(d["FaultFlushing"] for d in docs)
    lists = [sorted(e["RankId"] for e in d["RankList"]) for d in docs if d["RankList"]]
    assert lists and lists[0] == [0, 8]
    chosen = [
        s.strategy for _, steps in sim.clusterd.history[-1:] for s in steps if s.kind == StepKind.CHOOSE
    ]
    assert chosen == ["dump"]


def _hot_switch_job(sim: SimCluster, kube: Kube, name: str, scheduling: str) -> dict:
    job = create_job(
        kube,
        make_job(
            name, strategies=None, labels={"subHealthyStrategy": "hotSwitch", "fault-scheduling": scheduling}
        ),
    )
    clusterd = sim.clusterd
    assert clusterd is not None
    wait_for(lambda: clusterd.init_snapshot(job["metadata"]["uid"]), what="Init accepted (svc:550-555)")
    sim.inject_fault("default", name, rank=1, level="SubHealthFault", recovers=True)
    assert sim.wait_idle(20)
    return job


def _pods(kube: Kube, name: str) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in kube.list_job_pods("default", name)}


def test_a_hot_switch_hands_the_rank_to_the_operators_backup_pod(sim: SimCluster, kube: Kube) -> None:
    # The operator creates <pod>-hot-NNNN for needOperatorOpe=create (ascend-operator pod.go:474-525);
    # Volcano deletes the old pod and the operator strips podType/backupSourcePodName from the backup pod
    # (ascendjob_controller.go:466-497), which now holds rank 1.
    job = _hot_switch_job(sim, kube, "hs-backup", "grace")
    pods = _pods(kube, "hs-backup")
    assert "hs-backup-worker-0" not in pods
    (backup,) = [p for name, p in pods.items() if name.startswith("hs-backup-worker-0-hot-")]
    annotations = backup["metadata"]["annotations"]
    assert len(backup["metadata"]["name"].rsplit("-", 1)[1]) == 4
    assert annotations["hccl/rankIndex"] == "1" and annotations["inHotSwitchFlow"] == "true"
    assert "podType" not in annotations and "backupSourcePodName" not in annotations
    assert "HotSwitchStuck" not in event_reasons(kube, job)


def test_a_hot_switch_never_finishes_with_fault_scheduling_off(sim: SimCluster, kube: Kube) -> None:
    # Volcano skips the job (reschedule.go:108-114): the old pod keeps needVolcanoOpe=delete, the backup
    # pod stays a backup, and ClusterD waits for OldPodDeletedEvent with no timeout (rules.go:129-130).
    job = _hot_switch_job(sim, kube, "hs-off", "off")
    pods = _pods(kube, "hs-off")
    old = pods["hs-off-worker-0"]["metadata"]["annotations"]
    assert old["needVolcanoOpe"] == "delete" and old["backupNewPodName"].startswith("hs-off-worker-0-hot-")
    backup = pods[old["backupNewPodName"]]["metadata"]["annotations"]
    assert backup["podType"] == "backup" and backup["backupSourcePodName"] == "hs-off-worker-0"
    reasons = event_reasons(kube, job)
    assert "HotSwitchStuck" in reasons and "StrategyChosen" not in reasons

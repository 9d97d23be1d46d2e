"""D15: when the agent never reports, the simulated ClusterD waits the real 15 minutes on the simulated
clock, then goes where rules.go says. Paths under component/clusterd/pkg/application/recover/ in
Ascend/mind-cluster at 22bb3d98 (same at v7.2.RC1, v7.3.0, v26.0.0, v26.1.0)."""

from __future__ import annotations

from mindcluster import clusterd as engine
from mindcluster import keys as k
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.sim import create_job, event_reasons, make_job, podgroup_of


def _silent_agent_fault(
    sim: SimCluster,
    kube: Kube,
    name: str,
    strategies: str,
    fault_type: str,
    *,
    stop_report: int = engine.CODE_OK,
    strategy_reported: bool = True,
) -> list[str]:
    """Create the job, script an agent that never reports its result, inject one fault; check the
    recovery took the 15 simulated minutes and wrote no ProcessRecoverStatus (only
    handleCheckRecoverResult writes one, controller.go:1400-1413); returns the job's Event reasons."""
    job = create_job(kube, make_job(name, strategies=strategies))
    uid = job["metadata"]["uid"]
    wait_for(lambda: sim.clusterd.init_snapshot(uid), what=f"{name}: Init")
    sim.clusterd.taskd.script(
        uid, results=[engine.NO_REPORT], stop_report=stop_report, strategy_reported=strategy_reported
    )
    start = sim.clusterd.clock.monotonic()
    sim.inject_fault("default", name, rank=1, fault_type=fault_type, recovers=True)
    assert sim.wait_idle(30)
    assert sim.clusterd.clock.monotonic() - start >= engine.REPORT_TIMEOUT_S
    annotations = (podgroup_of(kube, job) or {})["metadata"].get("annotations", {})
    assert k.ANNOTATION_RECOVER_STATUS not in annotations
    reasons = event_reasons(kube, job)
    assert "RecoverFailed" not in reasons
    return reasons


def test_a_silent_retry_waits_15_minutes_then_fault_retry(sim: SimCluster, kube: Kube) -> None:
    # reportTimeoutMinutes = 15 (controller.go:36); handleDecideRetryStrategy's wait (controller.go:
    # 1728-1750); WaitReportStepRetryStatusState + ReportTimeoutEvent → FaultRetry (rules.go:211-212):
    # label pause, dump-exit, rescheduling, label on (controller.go:1534-1566). No FaultClear first.
    reasons = _silent_agent_fault(sim, kube, "rt-retry", "retry,recover,dump", "uce")
    assert "FaultClear" not in reasons
    path = (
        "StrategyChosen",
        "ReportTimeout",
        "ProcessRecoverPaused",
        "JobRescheduled",
        "ProcessRecoverResumed",
    )
    order = [reasons.index(r) for r in path]
    assert order == sorted(order)


def test_a_silent_recover_waits_15_minutes_then_fault_clear(sim: SimCluster, kube: Kube) -> None:
    # handleDecideRecoverStrategy's 15-minute timer (controller.go:1752-1797): ReportTimeoutEvent →
    # FaultClear (rules.go:218-219) → FaultRetry (rules.go:259-260).
    reasons = _silent_agent_fault(sim, kube, "rt-recover", "recover,dump", "normal")
    order = [reasons.index(r) for r in ("ReportTimeout", "FaultClear", "ProcessRecoverPaused")]
    assert order == sorted(order)


def test_a_silent_stop_complete_waits_15_minutes_and_chooses_nothing(sim: SimCluster, kube: Kube) -> None:
    # handleWaitReportStopComplete's 15-minute timer (controller.go:749-775): ReportTimeoutEvent →
    # FaultClear (rules.go:172-173) → FaultRetry (rules.go:259-260); globalFault is never sent, no
    # strategy is chosen.
    reasons = _silent_agent_fault(
        sim, kube, "rt-stop", "retry,recover,dump", "normal", stop_report=engine.NO_REPORT
    )
    assert "StrategyChosen" not in reasons
    order = [
        reasons.index(r) for r in ("ReportTimeout", "FaultClear", "ProcessRecoverPaused", "JobRescheduled")
    ]
    assert order == sorted(order)


def test_a_silent_strategy_report_waits_15_minutes_and_chooses_nothing(sim: SimCluster, kube: Kube) -> None:
    # handleWaitReportRecoverStrategy's 15-minute timer (controller.go:1604-1627): ReportTimeoutEvent →
    # FaultClear (rules.go:189-190) → FaultRetry.
    reasons = _silent_agent_fault(
        sim, kube, "rt-strategy", "retry,recover,dump", "uce", strategy_reported=False
    )
    assert "StrategyChosen" not in reasons
    order = [reasons.index(r) for r in ("ReportTimeout", "FaultClear", "ProcessRecoverPaused")]
    assert order == sorted(order)


def test_stop_complete_code_404_sends_kill_master_at_once(sim: SimCluster, kube: Kube) -> None:
    # ReportStopComplete with ProcessNotReady = 404 (code.go:29-30) → ProcessNotReadyEvent
    # (controller.go:767-768) → NotifyKillJob (rules.go:174-175): killMaster (controller.go:1570-1595),
    # no 15-minute wait, no FaultClear, the label never paused.
    job = create_job(kube, make_job("rt-notready", strategies="retry,recover,dump"))
    uid = job["metadata"]["uid"]
    wait_for(lambda: sim.clusterd.init_snapshot(uid), what="rt-notready: Init")
    sim.clusterd.taskd.script(uid, stop_report=engine.CODE_PROCESS_NOT_READY)
    start = sim.clusterd.clock.monotonic()
    sim.inject_fault("default", "rt-notready", rank=1, fault_type="normal", recovers=True)
    assert sim.wait_idle(30)
    assert sim.clusterd.clock.monotonic() - start < engine.REPORT_TIMEOUT_S
    reasons = event_reasons(kube, job)
    for absent in ("StrategyChosen", "FaultClear", "ProcessRecoverPaused", "ReportTimeout"):
        assert absent not in reasons
    assert reasons.index("ProcessNotReady") < reasons.index("KillMaster") < reasons.index("JobRescheduled")

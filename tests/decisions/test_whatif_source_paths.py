"""The what-if and the advice follow the source's path for sub-health and for a software fault under
dump (issue #25). Paths are in Ascend/mind-cluster at 22bb3d98, under
component/clusterd/pkg/application/recover/: ``svc`` = fault_recover_service.go, ``ctl`` =
controller.go, ``rules`` = rules.go, ``hs`` = hot_switch_controller.go."""

from __future__ import annotations

from typing import Any

from apps.advice.replay import path_of
from apps.decisions import whatif
from mindcluster import clusterd as engine

DUMP_ONLY = {"recover-strategy": "dump"}
ON = {"process-recover-enable": "on", "fault-scheduling": "grace"}


def _run(labels: dict[str, str], annotations: dict[str, str], level: str, **kw: Any) -> dict[str, Any]:
    fault = whatif.FaultSpec(fault_type="normal", ranks=(8,), level=level)
    scenario = whatif.Scenario(faults=[fault], pods=2, **kw)
    return whatif.simulate_podgroup(labels, annotations, scenario)["faults"][0]


def _plan(labels: dict[str, str], annotations: dict[str, str], level: str, supported: frozenset[str]) -> Any:
    policy = engine.RecoveryPolicy.from_podgroup(labels, annotations)
    fault = whatif.FaultSpec(fault_type="normal", ranks=(8,), level=level)
    scenario = whatif.Scenario(faults=[fault], pods=2)
    inputs, _, _ = whatif.engine_input(policy, fault, 0, scenario, supported, None, None)
    return engine.plan(inputs, whatif.oracle(fault))


def test_sub_health_without_hot_switch_or_grace_exit_is_not_handled() -> None:
    # skipHandleSubHealthyFaults (svc:331-352): SubHealthy, not hotSwitch, not graceExit → skipped.
    result = _run(ON, {"recover-strategy": "retry,recover,dump"}, "SubHealthFault")
    assert result["outcome"] == "ignored" and result["strategies"] == []
    assert "fault_recover_service.go:331-352" in result["steps"][0]["reason"]
    # graceExit is not enough: the sorted strategies must start with dump (ctl:448-456).
    grace = {**ON, "subHealthyStrategy": "graceExit"}
    assert _run(grace, {"recover-strategy": "recover,dump"}, "SubHealthFault")["outcome"] == "ignored"


def test_sub_health_under_grace_exit_with_dump_first_dumps_straight_away() -> None:
    # SubHealthy + graceExit + dump first: DumpForFault (ctl:459-472, 676-681) → saveAndExit
    # (ctl:716-747, rules:155-156), dump added to the agent's list unasked (ctl:679).
    steps = _plan({**ON, "subHealthyStrategy": "graceExit"}, DUMP_ONLY, "SubHealthFault", frozenset())
    attempts = [s for s in steps if s.kind == engine.StepKind.ATTEMPT]
    assert [(s.strategy, s.signal) for s in attempts] == [("dump", "saveAndExit")]
    assert engine.recover_statuses(steps) == ["dump-success"]  # ctl:1451-1457, no exit-completed (D1)


def test_sub_health_under_hot_switch_migrates_one_pod() -> None:
    # BeginHotSwitchEvent (svc:157-174) → hotSwitch machine (rules:92-144): migration (hs:139-149).
    # Volcano deletes the old pod only with fault-scheduling on (ascend-for-volcano
    # internal/rescheduling/reschedule.go:108-114).
    hot = {"subHealthyStrategy": "hotSwitch", "fault-scheduling": "grace"}
    result = _run(hot, {}, "SubHealthFault", supported=frozenset({"recover"}))
    assert result["strategies"] == ["migration"]
    kinds = [s["kind"] for s in result["steps"]]
    assert kinds[:3] == ["hot-switch", "hot-switch-new-pod", "delete-old-pod"]
    assert all(s["recover_status"] is None for s in result["steps"])
    # Without the label the old pod is never deleted and ClusterD waits for it with no timeout
    # (rules:129-130): no migration, the switch never finishes.
    stuck = _run({"subHealthyStrategy": "hotSwitch"}, {}, "SubHealthFault", supported=frozenset({"recover"}))
    assert stuck["strategies"] == [] and stuck["outcome"] == "hot-switch-stuck"
    assert [s["kind"] for s in stuck["steps"]][-1] == "hot-switch-stuck"
    # No backup pod within a minute: stop switch and the snapshot turns ignore (hs:61-95, 217-257).
    stopped = _run({"subHealthyStrategy": "hotSwitch"}, {}, "SubHealthFault", spare_resources=False)
    assert [s["kind"] for s in stopped["steps"]] == ["hot-switch", "hot-switch-stop", "sub-health-ignore"]


def test_software_fault_under_dump_goes_the_dump_for_fault_way() -> None:
    # ReportProcessFault with a non-retry fault: UnHealthy (svc:788-791), so dump-first dumps without
    # asking the agent: saveAndExit, no changeStrategy dump (ctl:459-472, 716-747).
    steps = _plan(ON, DUMP_ONLY, "", frozenset())
    attempts = [s for s in steps if s.kind == engine.StepKind.ATTEMPT]
    assert [(s.strategy, s.signal) for s in attempts] == [("dump", "saveAndExit")]
    assert "controller.go:430-470" in next(s.reason for s in steps if s.kind == engine.StepKind.CHOOSE)
    # Then the dump-exit signal and the after-result path (ctl:1840-1850, rules:236-275).
    kinds = [s.kind for s in steps]
    assert kinds.index(engine.StepKind.DUMP_EXIT) < kinds.index(engine.StepKind.FAULT_CLEAR)


def test_the_advice_prices_the_same_paths() -> None:
    # The advice replays engine.plan: the skipped sub-health fault costs nothing beyond detection,
    # the software fault under dump is a saved dump (no rollback) then rescheduling.
    skipped = path_of(_plan(ON, {"recover-strategy": "retry,recover,dump"}, "SubHealthFault", frozenset()))
    assert skipped.label == "not handled by ClusterD" and skipped.steps == () and not skipped.rollback
    dumped = path_of(_plan(ON, DUMP_ONLY, "", frozenset()))
    assert dumped.steps[0] == "dump_s" and "Job-level rescheduling" in dumped.label
    assert not dumped.rollback  # the dump checkpoint was saved before the rescheduling


def test_the_scenario_names_the_release_and_the_reschedule_wait() -> None:
    import pytest

    with pytest.raises(whatif.ScenarioError) as bad:
        whatif.parse_scenario({"faults": [{"type": "uce", "ranks": [8]}], "release": "8.0"})
    assert bad.value.field == "/release"
    with pytest.raises(whatif.ScenarioError) as wait:
        whatif.parse_scenario({"faults": [{"type": "uce", "ranks": [8]}], "wait_reschedule_timeout": 10})
    assert wait.value.field == "/wait_reschedule_timeout"  # 30-270 s (controller.go:1668-1679)
    # Platform mode answering retry: step retry on v7.3, preExitProcess then exit on v26 (svc:181-187).
    labels = {**ON}
    annotations = {"recover-strategy": "retry,recover,dump", "ProcessRecoverStrategy": ""}
    for release, strategies in (("7.3", ["retry"]), ("26.1", ["exit"])):
        scenario = whatif.parse_scenario(
            {"faults": [{"type": "uce", "ranks": [8], "platform_answer": "retry"}], "release": release}
        )
        result = whatif.simulate_podgroup(labels, annotations, scenario)["faults"][0]
        assert result["strategies"] == strategies, release


def test_an_agent_that_never_reports_is_waited_for_15_minutes() -> None:
    # D15: reportTimeoutMinutes = 15 (ctl:36), code 507 (domain/common/code.go:72-73). A silent retry
    # goes straight to FaultRetry (rules:211-212); a silent recover to FaultClear first (rules:218-219).
    scenario = whatif.parse_scenario(
        {"faults": [{"type": "uce", "ranks": [8], "attempts": [whatif.NO_REPORT_ATTEMPT]}], "pods": 2}
    )
    assert scenario.faults[0].attempts == (engine.NO_REPORT,)
    retry = whatif.simulate_podgroup(ON, {"recover-strategy": "retry,recover"}, scenario)["faults"][0]
    kinds = [s["kind"] for s in retry["steps"]]
    assert kinds[:3] == ["choose", "attempt", "report-timeout"] and "fault-clear" not in kinds
    timeout = retry["steps"][2]
    assert timeout["code"] == 507 and "controller.go:36" in timeout["reason"]
    assert kinds[3] == "pause" and retry["outcome"] == "job-rescheduled"
    silent = (engine.NO_REPORT,)
    fault = whatif.FaultSpec(fault_type="normal", ranks=(8,), level="SeparateNPU", attempts=silent)
    recover = whatif.simulate_podgroup(
        ON, {"recover-strategy": "recover"}, whatif.Scenario(faults=[fault], pods=2)
    )["faults"][0]
    kinds = [s["kind"] for s in recover["steps"]]
    assert kinds.index("report-timeout") + 1 == kinds.index("fault-clear") < kinds.index("pause")
    # A bad attempt value names the field.
    try:
        whatif.parse_scenario({"faults": [{"type": "uce", "ranks": [8], "attempts": ["later"]}], "pods": 2})
    except whatif.ScenarioError as exc:
        assert "attempts" in str(exc.args[0]) or "no-report" in str(exc)
    else:
        raise AssertionError("an unknown attempt value must be refused")


def test_the_advice_prices_a_hot_switch_that_never_finishes_as_failing() -> None:
    # fault-scheduling off: Volcano skips the job (ascend-for-volcano reschedule.go:108-114), ClusterD waits
    # for the old pod's deletion without a timeout (rules:129-130) after MindIO paused training (hs:151-187).
    steps = _plan({"subHealthyStrategy": "hotSwitch"}, {}, "SubHealthFault", frozenset({"recover"}))
    path = path_of(steps)
    assert path.fails and "never finishes" in path.label
    grace = _plan(
        {"subHealthyStrategy": "hotSwitch", "fault-scheduling": "grace"},
        {},
        "SubHealthFault",
        frozenset({"recover"}),
    )
    assert not path_of(grace).fails

"""ClusterD's strategy choice (mindcluster.md §3.2, §6.4, §7): one test per row of the behaviour tables."""

from __future__ import annotations

import pytest

from mindcluster.clusterd import (
    FAULT_HCCL,
    FAULT_OTHER,
    FAULT_UCE,
    EngineInput,
    RankFault,
    RecoveryPolicy,
    StepKind,
    after_failure,
    chosen_strategies,
    first_choice,
    parse_recover_strategy,
    plan,
)

ALL = frozenset({"retry", "recover-in-place", "recover", "elastic-training", "dump", "exit"})
UCE = RankFault(rank=8, pod_rank=1, node="node-2", fault_type=FAULT_UCE, level="RestartBusiness")
HCCL = RankFault(rank=9, pod_rank=1, node="node-2", fault_type=FAULT_HCCL, level="RestartRequest")
NORMAL = RankFault(rank=8, pod_rank=1, node="node-2", fault_type=FAULT_OTHER, level="SeparateNPU")
BUSINESS = RankFault(rank=8, pod_rank=1, node="node-2", fault_type=FAULT_OTHER, level="")
RESTART_REQUEST = RankFault(rank=8, pod_rank=1, node="node-2", fault_type=FAULT_OTHER, level="RestartRequest")
NODE = RankFault(
    rank=8, pod_rank=1, node="node-2", fault_type=FAULT_OTHER, level="SeparateFault", node_fault=True
)
RANK0 = RankFault(rank=0, pod_rank=0, node="node-1", fault_type=FAULT_OTHER, level="SeparateNPU")


def policy(
    strategies: str,
    *,
    fault_scheduling: str = "grace",
    pod: bool = False,
    platform: bool = False,
    label: str = "on",
) -> RecoveryPolicy:
    labels = {"fault-scheduling": fault_scheduling, "process-recover-enable": label}
    if pod:
        labels["pod-rescheduling"] = "on"
    annotations = {"recover-strategy": strategies}
    if platform:
        annotations["ProcessRecoverStrategy"] = ""
    return RecoveryPolicy.from_podgroup(labels, annotations)


def inputs(strategies: str, *faults: RankFault, supported: frozenset[str] = ALL, **kw: object) -> EngineInput:
    pol_kw = {key: kw.pop(key) for key in ("fault_scheduling", "pod", "platform", "label") if key in kw}
    return EngineInput(policy=policy(strategies, **pol_kw), supported=supported, faults=faults, **kw)  # type: ignore[arg-type]


def always(result: bool):
    return lambda strategy, attempt: result


# --- parsing ----------------------------------------------------------------------------------------
def test_unknown_and_spaced_names_are_silently_dropped() -> None:
    parsed = parse_recover_strategy("retry, recover,Dump,bogus,,dump", {})
    assert parsed == ("retry", "dump", "exit")


def test_pseudo_strategies_follow_the_labels_and_exit_is_always_added() -> None:
    labels = {"fault-scheduling": "grace", "pod-rescheduling": "on"}
    assert parse_recover_strategy("dump,recover,recover", labels) == (
        "recover",
        "dump",
        "exit",
        "pod-rescheduling",
        "job-rescheduling",
    )
    assert parse_recover_strategy(None, {"fault-scheduling": "off"}) == ("exit",)
    assert "job-rescheduling" in parse_recover_strategy("", {"fault-scheduling": "force"})


def test_order_written_does_not_matter() -> None:
    assert parse_recover_strategy("exit,dump,retry", {}) == parse_recover_strategy("retry,dump,exit", {})


# --- first choice -----------------------------------------------------------------------------------
def test_retry_recover_dump_with_uce_fault_chooses_retry() -> None:
    assert first_choice(inputs("retry,recover,dump", UCE)).strategy == "retry"


def test_hccl_fault_is_retry_type_too() -> None:
    steps = plan(inputs("retry,recover,dump", HCCL), always(True))
    assert chosen_strategies(steps) == ["retry"]
    attempt = next(s for s in steps if s.kind == StepKind.ATTEMPT)
    assert attempt.duration_s > 8.0  # waits for HCCL route convergence first


def test_retry_recover_dump_with_normal_fault_chooses_recover() -> None:
    decision = first_choice(inputs("retry,recover,dump", NORMAL))
    assert decision.strategy == "recover"
    assert "controller.go:1108-1119" in decision.reason  # chooseForRestartProcessFail


def test_a_mixed_event_is_not_retry_type() -> None:
    assert first_choice(inputs("retry,recover", UCE, NORMAL)).strategy == "recover"


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (BUSINESS, "recover-in-place"),
        (RESTART_REQUEST, "recover-in-place"),
        (NORMAL, "recover"),
        (NODE, "recover"),
    ],
)
def test_recover_in_place_only_for_business_or_restart_request_faults(
    fault: RankFault, expected: str
) -> None:
    assert first_choice(inputs("recover,recover-in-place", fault)).strategy == expected


def test_elastic_training_never_when_rank0_pod_is_faulty() -> None:
    assert first_choice(inputs("elastic-training,dump", RANK0, fault_scheduling="off")).strategy == "dump"
    assert (
        first_choice(inputs("elastic-training,dump", NORMAL, fault_scheduling="off")).strategy
        == "elastic-training"
    )


def test_elastic_training_with_rescheduling_only_without_spare_resources() -> None:
    assert first_choice(inputs("elastic-training,dump", NORMAL, spare_resources=True)).strategy == "dump"
    assert (
        first_choice(inputs("elastic-training,dump", NORMAL, spare_resources=False)).strategy
        == "elastic-training"
    )


def test_dump_alone_on_unhealthy_job_goes_straight_to_dump() -> None:
    decision = first_choice(inputs("dump", NODE))
    assert decision.strategy == "dump"
    assert "DumpForFault" in decision.reason and "controller.go:430-470" in decision.reason


def test_dump_alone_on_healthy_job_is_plain_rule_5() -> None:
    # A RestartRequest chip fault leaves the job Healthy: dump through chooseForRestartProcessFail.
    decision = first_choice(inputs("dump", RESTART_REQUEST))
    assert decision.strategy == "dump" and "controller.go:1108-1119" in decision.reason


def test_dump_alone_with_a_software_fault_is_dump_for_fault() -> None:
    # ReportProcessFault with a non-retry fault sets UnHealthy "to be able to dump directly"
    # (fault_recover_service.go:788-791), so dump-first goes DumpForFault (controller.go:459-472).
    decision = first_choice(inputs("dump", BUSINESS, supported=frozenset()))
    assert decision.strategy == "dump" and "controller.go:430-470" in decision.reason
    steps = plan(inputs("dump", BUSINESS, supported=frozenset()), always(True))
    assert [s.signal for s in steps if s.kind == StepKind.ATTEMPT] == ["saveAndExit"]


def test_strategy_must_be_supported_by_taskd() -> None:
    # Retry is first without asking the agent; an agent without retry sends ClusterD to dump/exit
    # (controller.go:1164-1183).
    decision = first_choice(inputs("retry,recover,dump", UCE, supported=frozenset({"exit"})))
    assert decision.strategy == "exit"
    assert "agent reports=[]" in decision.reason
    no_retry = frozenset({"recover", "dump"})
    assert first_choice(inputs("retry,recover,dump", UCE, supported=no_retry)).strategy == "dump"


def test_agent_words_map_to_product_strategies() -> None:
    # The agent says recover / downgrade (controller.go:376-401, const.go:53).
    words = frozenset({"recover", "downgrade"})
    assert first_choice(inputs("recover-in-place", BUSINESS, supported=words)).strategy == "recover-in-place"
    scale_in = inputs("elastic-training", NORMAL, supported=words, fault_scheduling="off")
    assert first_choice(scale_in).strategy == "elastic-training"


# --- fallback ---------------------------------------------------------------------------------------
def test_recover_failing_goes_to_dump_then_dump_exit_and_fault_retry() -> None:
    # Issue 13 said only fault-retry pauses the label; issue 25 (source facts D2) corrects it: a dump
    # result writes dump-failed and sends dump_exit (controller.go:1451-1457), then CheckResultFinish →
    # ListenScheduleResult (≤4x5 s, controller.go:1809-1827) → ScheduleTimeout → FaultClear → FaultRetry,
    # which pauses the label and sends dump_exit again (rules.go:236-275, controller.go:1534-1568).
    steps = plan(inputs("retry,recover,dump", NORMAL), always(False))
    assert chosen_strategies(steps) == ["recover", "dump"]
    kinds = [s.kind for s in steps]
    tail = kinds[kinds.index(StepKind.DUMP_EXIT) :]
    assert tail[:5] == [
        StepKind.DUMP_EXIT,
        StepKind.LISTEN_SCHEDULE,
        StepKind.FAULT_CLEAR,
        StepKind.PAUSE,
        StepKind.DUMP_EXIT,
    ]
    assert tail.index(StepKind.PAUSE) < tail.index(StepKind.JOB_RESCHEDULE) < tail.index(StepKind.RESUME)
    dump_exit = next(s for s in steps if s.kind == StepKind.DUMP_EXIT)
    assert (dump_exit.change_strategy, dump_exit.extra_params) == ("exit", "dump_exit")
    statuses = [s.recover_status for s in steps if s.recover_status]
    assert statuses == ["recover-failed", "dump-failed"]


def test_exit_writes_no_status_and_platform_mode_skips_the_schedule_wait() -> None:
    # D1: a chosen exit goes NotifyExitSuccessEvent → handleDecideExitStrategy, which writes nothing
    # (rules.go:202-203, controller.go:1804-1807). D2 in platform mode: ListenScheduleResult succeeds at
    # once (controller.go:1810-1813) → restartAllProcess (controller.go:1829-1838) → no 60 s wait
    # (controller.go:1867-1870) → FaultClear (controller.go:692-701) → FaultRetry (controller.go:1534-1568).
    steps = plan(inputs("recover", NORMAL, platform=True, platform_choice="exit"), always(True))
    assert "exit-completed" not in [s.recover_status for s in steps]
    kinds = [s.kind for s in steps]
    after = kinds[kinds.index(StepKind.EXIT) + 1 :]
    restart_clear_pause = [StepKind.RESTART_ALL_PROCESS, StepKind.FAULT_CLEAR, StepKind.PAUSE]
    assert after[:4] == [*restart_clear_pause, StepKind.DUMP_EXIT]
    assert StepKind.LISTEN_SCHEDULE not in after and after[-2:] == [StepKind.RESUME, StepKind.DONE]


def test_fault_retry_with_nothing_to_restart_the_job_ends_in_kill_master() -> None:
    # FaultRetry waits 27x5 s for the job (const.go:136-141); on timeout killMaster, label left at pause
    # (rules.go:264-271).
    steps = plan(inputs("recover", NORMAL, fault_scheduling="off", supported=frozenset()), always(True))
    kinds = [s.kind for s in steps]
    assert kinds[-3:] == [StepKind.DUMP_EXIT, StepKind.KILL_MASTER, StepKind.JOB_FAILED]
    assert StepKind.RESUME not in kinds
    kill = steps[-2]
    assert kill.signal == "killMaster" and kill.duration_s == 135


def test_retry_failing_walks_the_whole_fallback_chain() -> None:
    # retry fails (405 by default) → re-flush → in-place; in-place reports as recover, so its failure
    # goes to dump (controller.go:1137-1158).
    steps = plan(inputs("retry,recover-in-place,recover,dump", UCE), always(False))
    assert chosen_strategies(steps) == ["retry", "recover-in-place", "dump"]


def test_retry_failed_then_recover_succeeds() -> None:
    outcomes = iter([False, True])
    steps = plan(inputs("retry,recover,dump", UCE), lambda s, n: next(outcomes))
    assert chosen_strategies(steps) == ["retry", "recover"]
    assert steps[-1].kind == StepKind.DONE
    assert [s.recover_status for s in steps if s.recover_status] == ["retry-failed", "recover-success"]


def test_anything_else_failed_goes_to_exit() -> None:
    assert after_failure(inputs("dump,recover", NORMAL), "dump").strategy == "exit"


def test_dump_success_still_exits_and_reschedules() -> None:
    steps = plan(inputs("dump", NODE, pod=True), always(True))
    kinds = [s.kind for s in steps]
    assert StepKind.SUCCEEDED in kinds and StepKind.POD_RESCHEDULE in kinds


def test_pod_rescheduling_uses_job_level_when_rank0_fails() -> None:
    steps = plan(inputs("recover", RANK0, pod=True), always(False))
    assert StepKind.JOB_RESCHEDULE in [s.kind for s in steps]
    assert StepKind.POD_RESCHEDULE not in [s.kind for s in steps]


def test_no_rescheduling_configured_means_failed() -> None:
    steps = plan(inputs("recover", NORMAL, fault_scheduling="off"), always(False))
    assert steps[-1].kind == StepKind.JOB_FAILED


def test_exhausted_budget_means_failed() -> None:
    steps = plan(inputs("recover", NORMAL, restart_budget=0), always(False))
    assert steps[-1].kind == StepKind.JOB_FAILED and "budget" in steps[-1].reason


def test_label_off_skips_process_recovery() -> None:
    steps = plan(inputs("retry,recover", UCE, label=""), always(True))
    assert chosen_strategies(steps) == []
    assert [s.kind for s in steps] == [StepKind.JOB_RESCHEDULE, StepKind.DONE]


# --- platform mode ----------------------------------------------------------------------------------
@pytest.mark.parametrize("choice", ["retry", "recover", "dump"])
def test_platform_mode_accepts_the_platforms_choice(choice: str) -> None:
    decision = first_choice(inputs("retry,recover,dump", UCE, platform=True, platform_choice=choice))
    assert decision.strategy == choice


def test_platform_mode_only_uses_strategies_equal_to_the_choice() -> None:
    decision = first_choice(inputs("recover,dump", UCE, platform=True, platform_choice="retry"))
    assert decision.strategy == "exit"


def test_platform_timeout_is_508_then_fault_retry() -> None:
    # v26 sends preExitProcess first in platform mode (fault_recover_service.go:181-187): retry is not
    # "supported" before the platform's answer is read (controller.go:364-370).
    v26 = plan(inputs("retry,recover", UCE, platform=True, platform_timed_out=True), always(True))
    assert [s.kind for s in v26[:2]] == [StepKind.PRE_EXIT, StepKind.PLATFORM_TIMEOUT]
    steps = plan(
        inputs("retry,recover", UCE, platform=True, platform_timed_out=True, release="7.3"), always(True)
    )
    assert steps[0].kind == StepKind.PLATFORM_TIMEOUT and steps[0].code == 508
    assert chosen_strategies(steps) == []
    kinds = [s.kind for s in steps]
    assert kinds[1:3] == [StepKind.PAUSE, StepKind.DUMP_EXIT] and StepKind.RESUME in kinds
    assert all(s.recover_status is None for s in steps)  # no exit-completed after 508


def test_plan_is_deterministic() -> None:
    first = plan(inputs("retry,recover,dump", UCE, NORMAL), always(False))
    second = plan(inputs("retry,recover,dump", UCE, NORMAL), always(False))
    assert first == second

"""The conformance table of issue #25: the base table (``scenarios.py``) with the source-facts D1
correction applied, plus the harder paths a job meets when recovery does not go well.

D1 (``component/clusterd/pkg/application/recover/rules.go:202-203``, ``controller.go:1804-1807``): a chosen
``exit`` fires NotifyExitSuccessEvent → ``handleDecideExitStrategy``, which only returns
CheckResultFinishEvent; ``ExitCompleted`` is written only by ``handleCheckRecoverResult``
(``controller.go:1446-1449``) when an agent reports a result with strategy ``exit`` while ClusterD awaits
another result, which the normal flow never does. So no scenario's outcome may contain
``exit-completed``. The base table is left as it is (another change de-duplicates it); the
correction is applied here, by scenario id, so a scenario that disappears there is noticed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from tests.conformance.scenarios import (
    BUSINESS,
    IN_PLACE_OK,
    NORMAL,
    RECOVER_OK,
    RESTART_REQUEST,
    RETRY_OK,
    SUBHEALTH,
    UCE,
    Fault,
    Outcome,
    Scenario,
    _s,
    dumped,
)
from tests.conformance.scenarios import SCENARIOS as BASE
from tests.conformance.scenarios_d12_d15 import SCENARIOS as D12_D15

D1_SRC: Final = (
    "component/clusterd/pkg/application/recover/rules.go:202-203",
    "component/clusterd/pkg/application/recover/controller.go:1804-1807",
)
EXIT_COMPLETED: Final = "exit-completed"

# The base scenarios whose expected statuses wrongly contain exit-completed (issue #25: 14 and more).
D1_CORRECTED: Final = frozenset(s.id for s in BASE if EXIT_COMPLETED in s.expected.statuses)


def _without_exit_completed(scenario: Scenario) -> Scenario:
    if scenario.id not in D1_CORRECTED:
        return scenario
    statuses = tuple(s for s in scenario.expected.statuses if s != EXIT_COMPLETED)
    return replace(
        scenario,
        expected=replace(scenario.expected, statuses=statuses),
        src=(*scenario.src, *(s for s in D1_SRC if s not in scenario.src)),
    )


# --- corrections of base scenarios the second reading found wrong (by id) --------------------------
SVC: Final = "component/clusterd/pkg/application/recover/fault_recover_service.go"
CTL: Final = "component/clusterd/pkg/application/recover/controller.go"
RULES: Final = "component/clusterd/pkg/application/recover/rules.go"
HS: Final = "component/clusterd/pkg/application/recover/hot_switch_controller.go"
PLAT: Final = "component/clusterd/pkg/application/recover/fault_recover_platform_plugin.go"
PG_UTIL: Final = "component/clusterd/pkg/domain/podgroup/pg_util.go"
UTILS: Final = "component/clusterd/pkg/domain/common/utils.go"
CODE: Final = "component/clusterd/pkg/domain/common/code.go"
CONST: Final = "component/clusterd/pkg/common/constant/const.go"
TD_MANAGER: Final = "component/taskd/taskd/go/framework_backend/manager/manager.go"
FAULT_RANK: Final = (
    "component/clusterd/pkg/application/faultmanager/jobprocess/faultrank/job_fault_rank_processor.go"
)

S_SOFT: Final = f"{SVC}:788-791"  # ReportProcessFault: a non-retry software fault → UnHealthy
S_SUB_DROP: Final = f"{SVC}:302-304"
S_SUB_SKIP: Final = f"{SVC}:331-352"
S_HS_GATE: Final = f"{SVC}:354-405"
S_HS_BEGIN: Final = f"{SVC}:157-174"
S_HS_RULES: Final = f"{RULES}:92-144"
S_PRE_EXIT: Final = f"{SVC}:181-187"
S_PRE_EXIT_SIGNAL: Final = f"{SVC}:199-231"
S_RETRY_AT_FAULT: Final = f"{SVC}:260-273"
S_ONLY_DUMP: Final = f"{CTL}:430-457"
S_SHOULD_DUMP: Final = f"{CTL}:459-472"
S_DUMP_EVENT: Final = f"{CTL}:676-681"
S_SAVE_EXIT: Final = f"{CTL}:716-747"
S_DUMP_RULES: Final = f"{RULES}:155-156"
S_FILTER: Final = f"{SVC}:64"
S_LISTEN: Final = f"{CTL}:1654-1702"
S_WAIT_TIMEOUT: Final = f"{CTL}:1668-1679"
S_SCHEDULE_TIMEOUT: Final = f"{CTL}:1764-1773"
S_SCALE_AFTER: Final = f"{RULES}:283-284"
S_PLAT_STANDING: Final = f"{PLAT}:25-57"
S_RANK_TABLE_WAIT: Final = f"{PLAT}:140-159"
S_IN_PLACE_LIVE: Final = f"{PG_UTIL}:94-118"
S_IN_PLACE_SNAPSHOT: Final = f"{CTL}:1023-1030"

HOT_SWITCH: Final = {"subHealthyStrategy": "hotSwitch"}
GRACE_EXIT: Final = {"subHealthyStrategy": "graceExit"}
PLATFORM: Final = {"ProcessRecoverStrategy": ""}
IGNORED: Final = Outcome()
MIGRATED: Final = Outcome(("migration",))


def exited(rescheduled: str = "job") -> Outcome:
    """The base table's ``exited`` with the D1 correction: no exit-completed."""
    return Outcome(("exit",), rescheduled=rescheduled)


CORRECTIONS: Final[dict[str, dict[str, object]]] = {
    # D5: from v26.0 a hardware fault in platform mode gets preExitProcess (retry is not "supported"
    # before the platform's answer is read), so the step-retry scenario holds for v7.x only.
    "plat-retry": {"release": "7.3"},
    # D4/D8: a software fault makes the job UnHealthy, so dump-first dumps without asking the agent.
    "dump-healthy-agent-lacks-dump": {"expected": dumped(), "src": (S_SOFT, S_SHOULD_DUMP, S_DUMP_EVENT)},
    # D3: a SubHealthy fault without hotSwitch or graceExit is skipped before the state machine.
    "dump-subhealthy-without-graceexit": {"expected": IGNORED, "src": (S_SUB_SKIP,)},
    # D6: a refused Init is retried every second and not cached; the label pushed later is read.
    "init-refused-label-pushed-later": {
        "expected": RECOVER_OK,
        "src": (f"{TD_MANAGER}:468-523", f"{SVC}:579-585", f"{SVC}:550-555"),
    },
}


HARD_PATHS: Final[list[Scenario]] = [
    # --- D3: sub-health -------------------------------------------------------------------------------
    _s(
        id="subhealth-ignore-skipped",
        src=(S_SUB_SKIP,),
        strategies="retry,recover,dump",
        faults=(SUBHEALTH,),
        expected=IGNORED,
    ),
    _s(
        id="subhealth-graceexit-recover-first-skipped",
        src=(S_SUB_SKIP, S_ONLY_DUMP),
        strategies="recover,dump",
        labels=GRACE_EXIT,
        faults=(SUBHEALTH,),
        expected=IGNORED,
    ),
    _s(
        id="subhealth-graceexit-retry-first-skipped",
        src=(S_SUB_SKIP, f"{UTILS}:31-38"),
        strategies="retry,dump",
        labels=GRACE_EXIT,
        faults=(SUBHEALTH,),
        expected=IGNORED,
    ),
    _s(
        id="subhealth-graceexit-dump-first-agent-silent",
        src=(S_SHOULD_DUMP, S_DUMP_EVENT, S_DUMP_RULES),
        strategies="dump",
        labels=GRACE_EXIT,
        faults=(SUBHEALTH,),
        agent=(),
        expected=dumped(),
    ),
    _s(
        id="subhealth-graceexit-dump-first-v7.3",
        src=(S_SUB_SKIP, S_SHOULD_DUMP),
        release="7.3",
        strategies="dump",
        labels=GRACE_EXIT,
        faults=(SUBHEALTH,),
        expected=dumped(),
    ),
    _s(
        id="subhealth-graceexit-dump-pod-rescheduling",
        src=(S_SHOULD_DUMP, S_SAVE_EXIT, f"{UTILS}:119-121"),
        strategies="dump",
        labels={**GRACE_EXIT, "pod-rescheduling": "on"},
        fault_scheduling="off",
        faults=(SUBHEALTH,),
        expected=dumped("pod"),
    ),
    _s(
        id="subhealth-graceexit-platform-skipped",
        src=(S_SUB_SKIP, f"{CTL}:436-446"),
        strategies="dump",
        labels=GRACE_EXIT,
        annotations=PLATFORM,
        platform="dump",
        faults=(SUBHEALTH,),
        expected=IGNORED,
    ),
    _s(
        id="subhealth-dropped-beside-unhealthy",
        src=(S_SUB_DROP, f"{CTL}:1096-1106"),
        strategies="recover,dump",
        faults=(SUBHEALTH, NORMAL),
        expected=RECOVER_OK,
    ),
    _s(
        id="subhealth-with-node-fault-dump-first",
        src=(S_SUB_DROP, S_SHOULD_DUMP),
        strategies="dump",
        faults=(SUBHEALTH, Fault(1, "node", "SeparateFault")),
        agent=(),
        expected=dumped(),
    ),
    # --- D3: hotSwitch ------------------------------------------------------------------------------
    _s(
        id="hotswitch-migration-success",
        src=(S_HS_GATE, S_HS_BEGIN, S_HS_RULES, f"{HS}:139-149"),
        strategies=None,
        labels=HOT_SWITCH,
        faults=(SUBHEALTH,),
        expected=MIGRATED,
    ),
    _s(
        id="hotswitch-with-process-strategies",
        src=(S_HS_BEGIN, f"{HS}:20-59"),
        strategies="retry,recover,dump",
        labels=HOT_SWITCH,
        faults=(SUBHEALTH,),
        expected=MIGRATED,
    ),
    _s(
        id="hotswitch-migration-406-stops-job",
        src=(f"{HS}:189-215", f"{HS}:125-137", S_HS_RULES),
        strategies=None,
        labels=HOT_SWITCH,
        faults=(SUBHEALTH,),
        results=(406,),
        expected=Outcome(("migration",), codes=(406,), rescheduled="job"),
    ),
    _s(
        id="hotswitch-migration-failed-stops-job",
        src=(f"{HS}:189-215", f"{HS}:217-257"),
        strategies="recover",
        labels=HOT_SWITCH,
        faults=(SUBHEALTH,),
        results=(False,),
        expected=Outcome(("migration",), codes=(406,), rescheduled="job"),
    ),
    _s(
        id="hotswitch-pause-result-exit-only",
        src=(f"{HS}:151-187", f"{HS}:125-137"),
        strategies=None,
        labels=HOT_SWITCH,
        faults=(SUBHEALTH,),
        agent=(),
        expected=Outcome(rescheduled="job"),
    ),
    _s(
        id="hotswitch-no-backup-pod",
        src=(f"{HS}:61-95", f"{RULES}:104-110"),
        strategies=None,
        labels=HOT_SWITCH,
        faults=(SUBHEALTH,),
        spare=False,
        expected=IGNORED,
    ),
    _s(
        id="hotswitch-rank0-fault-skipped",
        src=(f"{SVC}:377-394",),
        strategies=None,
        labels=HOT_SWITCH,
        faults=(Fault(0, "normal", "SubHealthFault"),),
        expected=IGNORED,
    ),
    _s(
        id="hotswitch-rank0-and-worker",
        src=(f"{SVC}:369-388", f"{HS}:36-59"),
        strategies=None,
        labels=HOT_SWITCH,
        faults=(Fault(0, "normal", "SubHealthFault"), SUBHEALTH),
        expected=MIGRATED,
    ),
    _s(
        id="hotswitch-tensorflow-ignored",
        src=(f"{SVC}:355-360",),
        framework="tensorflow",
        strategies=None,
        labels=HOT_SWITCH,
        faults=(SUBHEALTH,),
        expected=IGNORED,
    ),
    _s(
        id="hotswitch-unhealthy-fault-normal-path",
        src=(f"{SVC}:331-335", f"{CTL}:1108-1119"),
        strategies="recover,dump",
        labels=HOT_SWITCH,
        faults=(NORMAL,),
        expected=RECOVER_OK,
    ),
    _s(
        id="hotswitch-init-accepted-without-label",
        src=(f"{SVC}:550-555", f"{UTILS}:130-138"),
        strategies=None,
        labels=HOT_SWITCH,
        faults=(),
        expected=Outcome(init=0),
    ),
    # --- D4 / D8: software faults and dump-for-fault -------------------------------------------------
    _s(
        id="software-fault-dump-first-agent-silent",
        src=(S_SOFT, f"{CTL}:679"),
        strategies="dump",
        faults=(BUSINESS,),
        agent=(),
        expected=dumped(),
    ),
    _s(
        id="software-fault-dump-first-platform-dump",
        src=(S_SOFT, f"{CTL}:436-446", f"{CTL}:664-674"),
        strategies="dump",
        annotations=PLATFORM,
        platform="dump",
        faults=(BUSINESS,),
        agent=("retry",),
        expected=dumped(),
    ),
    _s(
        id="software-fault-dump-first-v7.3",
        src=(S_SOFT, S_SAVE_EXIT),
        release="7.3",
        strategies="dump",
        faults=(BUSINESS,),
        agent=("retry",),
        expected=dumped(),
    ),
    _s(
        id="software-fault-dump-pod-rescheduling",
        src=(S_SOFT, f"{RULES}:236-275"),
        strategies="dump",
        labels={"pod-rescheduling": "on"},
        fault_scheduling="off",
        faults=(BUSINESS,),
        expected=dumped("pod"),
    ),
    _s(
        id="software-fault-dump-nothing-reschedules",
        src=(S_SOFT, f"{RULES}:264-271"),
        strategies="dump",
        fault_scheduling="off",
        faults=(BUSINESS,),
        expected=dumped("failed"),
    ),
    _s(
        id="software-fault-dump-failed",
        src=(S_SOFT, f"{CTL}:1451-1457"),
        strategies="dump",
        faults=(BUSINESS,),
        agent=(),
        results=(False,),
        expected=Outcome(("dump",), ("dump-failed",), (499,), rescheduled="job"),
    ),
    _s(
        id="software-fault-recover-first",
        src=(S_SOFT, S_ONLY_DUMP),
        strategies="recover,dump",
        faults=(BUSINESS,),
        expected=RECOVER_OK,
    ),
    _s(
        id="software-uce-fault-retries",
        src=(f"{SVC}:792-798", f"{CTL}:1096-1106"),
        strategies="retry,recover,dump",
        faults=(Fault(1, "uce", ""),),
        expected=RETRY_OK,
    ),
    # --- D9: levels filtered before recovery ----------------------------------------------------------
    _s(
        id="not-handle-fault-ignored",
        src=(S_FILTER,),
        strategies="retry,recover,dump",
        faults=(Fault(1, "normal", "NotHandleFault"),),
        expected=IGNORED,
    ),
    _s(
        id="pre-separate-npu-ignored",
        src=(S_FILTER, f"{FAULT_RANK}:104-121"),
        strategies="recover,dump",
        faults=(Fault(1, "normal", "PreSeparateNPU"),),
        expected=IGNORED,
    ),
    _s(
        id="pre-separate-fault-node-level-handled",
        src=(S_FILTER, f"{CONST}:217-248"),
        strategies="recover,dump",
        faults=(Fault(1, "node", "PreSeparateFault"),),
        expected=RECOVER_OK,
    ),
    _s(
        id="not-handle-beside-separate",
        src=(S_FILTER, f"{CTL}:1108-1119"),
        strategies="recover",
        faults=(Fault(1, "normal", "NotHandleFault"), NORMAL),
        expected=RECOVER_OK,
    ),
    _s(
        id="pre-separate-npu-v7.2-handled",
        src=(f"{FAULT_RANK}:104-121",),
        release="7.2",
        strategies="recover,dump",
        faults=(Fault(1, "normal", "PreSeparateNPU"),),
        expected=RECOVER_OK,
    ),
    # --- D5: v26 preExitProcess -----------------------------------------------------------------------
    _s(
        id="plat-retry-v26-pre-exit",
        src=(S_PRE_EXIT, S_PRE_EXIT_SIGNAL, f"{CTL}:364-370", S_SOFT),
        strategies="retry,recover,dump",
        annotations=PLATFORM,
        platform="retry",
        faults=(UCE,),
        expected=exited(),
    ),
    _s(
        id="plat-retry-v26.0-pre-exit",
        src=(S_PRE_EXIT, S_RETRY_AT_FAULT),
        release="26.0",
        strategies="retry,recover",
        annotations=PLATFORM,
        platform="retry",
        faults=(UCE,),
        expected=exited(),
    ),
    _s(
        id="v26-uce-retry-no-pre-exit",
        src=(S_PRE_EXIT, S_RETRY_AT_FAULT, f"{SVC}:188"),
        strategies="retry,recover",
        faults=(UCE,),
        expected=RETRY_OK,
    ),
    _s(
        id="v26-uce-dump-only-pre-exit-dumps",
        src=(S_PRE_EXIT, S_SOFT, S_SHOULD_DUMP),
        strategies="dump",
        faults=(UCE,),
        agent=("retry",),
        expected=dumped(),
    ),
    _s(
        id="v73-uce-dump-only-exits",
        src=(f"{CTL}:1108-1119", f"{CTL}:418-428"),
        release="7.3",
        strategies="dump",
        faults=(UCE,),
        agent=("retry",),
        expected=exited(),
    ),
    _s(
        id="v26-restart-request-dump-only-dumps",
        src=(S_PRE_EXIT_SIGNAL, S_SOFT),
        strategies="dump",
        faults=(RESTART_REQUEST,),
        agent=("retry",),
        expected=dumped(),
    ),
    _s(
        id="v73-restart-request-dump-only-exits",
        src=(f"{CTL}:1108-1119",),
        release="7.3",
        strategies="dump",
        faults=(RESTART_REQUEST,),
        agent=("retry",),
        expected=exited(),
    ),
    _s(
        id="v26-hccl-no-retry-pre-exit-recover",
        src=(S_PRE_EXIT, f"{CTL}:1108-1119"),
        strategies="recover,dump",
        faults=(Fault(1, "hccl", "RestartRequest"),),
        expected=RECOVER_OK,
    ),
    # --- D7: recover waits for the rescheduled pods ---------------------------------------------------
    _s(
        id="recover-no-new-pod-503",
        src=(S_LISTEN, S_SCHEDULE_TIMEOUT, f"{RULES}:216-217", f"{CODE}:65"),
        strategies="recover,dump",
        faults=(NORMAL,),
        spare=False,
        expected=Outcome(("recover",), codes=(503,), rescheduled="job"),
    ),
    _s(
        id="recover-no-new-pod-scale-in",
        src=(S_SCHEDULE_TIMEOUT, S_SCALE_AFTER, f"{CTL}:388-401"),
        strategies="recover,elastic-training",
        faults=(NORMAL,),
        spare=False,
        expected=Outcome(("recover", "elastic-training")),
    ),
    _s(
        id="recover-no-new-pod-short-timeout",
        src=(S_WAIT_TIMEOUT, S_LISTEN),
        strategies="recover",
        faults=(NORMAL,),
        spare=False,
        live={"annotations": {"wait-reschedule-timeout": "30"}},
        expected=Outcome(("recover",), codes=(503,), rescheduled="job"),
    ),
    _s(
        id="recover-no-new-pod-bad-timeout",
        src=(S_WAIT_TIMEOUT,),
        strategies="recover",
        faults=(NORMAL,),
        spare=False,
        live={"annotations": {"wait-reschedule-timeout": "900"}},
        expected=Outcome(("recover",), codes=(503,), rescheduled="job"),
    ),
    _s(
        id="recover-no-new-pod-pod-rescheduling",
        src=(S_SCHEDULE_TIMEOUT, f"{CTL}:1534-1566"),
        strategies="recover",
        labels={"pod-rescheduling": "on"},
        fault_scheduling="off",
        faults=(NORMAL,),
        spare=False,
        expected=Outcome(("recover",), codes=(503,), rescheduled="pod"),
    ),
    _s(
        id="recover-no-new-pod-nothing-reschedules",
        src=(S_SCHEDULE_TIMEOUT, f"{RULES}:264-271"),
        strategies="recover",
        fault_scheduling="off",
        faults=(NORMAL,),
        spare=False,
        expected=Outcome(("recover",), codes=(503,), rescheduled="failed"),
    ),
    _s(
        id="recover-no-new-pod-agent-lacks-downgrade",
        src=(S_SCHEDULE_TIMEOUT, f"{CTL}:388-401"),
        strategies="recover,elastic-training",
        faults=(NORMAL,),
        spare=False,
        agent=("retry", "recover", "dump"),
        expected=Outcome(("recover",), codes=(503,), rescheduled="job"),
    ),
    # --- scale-in result 201: isolate the nodes first --------------------------------------------------
    _s(
        id="scale-in-201-isolate-then-success",
        src=(f"{CTL}:1468-1493", f"{RULES}:296-306", f"{CODE}:15"),
        strategies="elastic-training,dump",
        fault_scheduling="off",
        faults=(NORMAL,),
        results=(201, True),
        expected=Outcome(("elastic-training",)),
    ),
    _s(
        id="scale-in-201-then-failed-dump",
        src=(f"{CTL}:1494-1499", f"{RULES}:300-301", f"{CTL}:1153-1158"),
        strategies="elastic-training,dump",
        fault_scheduling="off",
        labels={"pod-rescheduling": "on"},
        spare=False,
        faults=(NORMAL,),
        results=(201, False, True),
        expected=Outcome(("elastic-training", "dump"), ("dump-success",), (499,), rescheduled="pod"),
    ),
    # --- D10: recover-in-place reads recover-strategy live -------------------------------------------
    _s(
        id="in-place-live-strategy-removed",
        src=(S_IN_PLACE_LIVE, S_IN_PLACE_SNAPSHOT),
        strategies="recover-in-place,recover",
        faults=(BUSINESS,),
        live={"annotations": {"recover-strategy": "recover"}},
        expected=RECOVER_OK,
    ),
    _s(
        id="in-place-live-label-off",
        src=(f"{PG_UTIL}:94-100",),
        strategies="recover-in-place,recover",
        faults=(BUSINESS,),
        live={"labels": {"process-recover-enable": "off"}},
        expected=RECOVER_OK,
    ),
    _s(
        id="in-place-live-spaces-removed",
        src=(f"{PG_UTIL}:106-110",),
        strategies="recover-in-place,recover",
        faults=(BUSINESS,),
        live={"annotations": {"recover-strategy": "recover, recover-in-place"}},
        expected=IN_PLACE_OK,
    ),
    _s(
        id="in-place-live-added-not-in-snapshot",
        src=(f"{CTL}:360-362", S_IN_PLACE_SNAPSHOT),
        strategies="recover",
        faults=(BUSINESS,),
        live={"annotations": {"recover-strategy": "recover-in-place,recover"}},
        expected=RECOVER_OK,
    ),
    # --- D6: Init retried ---------------------------------------------------------------------------
    _s(
        id="init-refused-label-only-pushed-later",
        src=(f"{TD_MANAGER}:468-523", f"{UTILS}:121"),
        strategies=None,
        faults=(NORMAL,),
        live={"labels": {"process-recover-enable": "on"}},
        expected=exited(),
    ),
    # --- D11: platform answers ----------------------------------------------------------------------
    _s(
        id="plat-exit-not-a-standing-answer",
        src=(S_PLAT_STANDING, f"{CTL}:664-674"),
        strategies="recover,dump",
        annotations=PLATFORM,
        platform="exit",
        faults=(NORMAL,),
        expected=Outcome(codes=(508,), rescheduled="job"),
    ),
    _s(
        id="plat-rank-table-false",
        src=(S_RANK_TABLE_WAIT, f"{CTL}:1219-1233"),
        strategies="recover,dump",
        annotations={**PLATFORM, "RankTableReady": "false"},
        platform="recover",
        rank_table="false",
        faults=(NORMAL,),
        expected=Outcome(("recover", "exit"), rescheduled="job"),
    ),
]


def _corrected(scenario: Scenario) -> Scenario:
    change = CORRECTIONS.get(scenario.id)
    if change is None:
        return scenario
    src = change.get("src", ())
    return replace(
        scenario,
        **{key: value for key, value in change.items() if key != "src"},  # type: ignore[arg-type]
        src=(*scenario.src, *(s for s in src if s not in scenario.src)),  # type: ignore[union-attr]
    )


SCENARIOS: Final = [*(_corrected(_without_exit_completed(s)) for s in BASE), *HARD_PATHS, *D12_D15]


def sources() -> list[str]:
    """Every cited source line range, once, sorted."""
    return sorted({src for scenario in SCENARIOS for src in scenario.src})

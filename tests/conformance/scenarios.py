"""The conformance table: what the real ClusterD does, scenario by scenario, written by hand from the
MindCluster Go source (``Ascend/mind-cluster`` at 22bb3d987bc0208c3eb7395e222b661276133c58).

Each row: the job as created (recover-strategy annotation, labels, annotations, release), PodGroup
keys changed after ``Init`` (``live``), the faults of one event (pod rank, type, level), what the
agent reports (its words: retry / recover / dump / downgrade), the result of each attempt (True, or
the ReportRecoverStatus code), the platform's answer, and the expected outcome: the strategies
ClusterD chooses, the ProcessRecoverStatus values it writes, the codes, the Init code and whether
Volcano reschedules the job or pods. ``src`` cites the lines each expectation comes from.

The expectations were derived by reading the source, not by running ``engine.plan``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

R: Final = "component/clusterd/pkg/application/recover/"
CTL: Final = R + "controller.go"
SVC: Final = R + "fault_recover_service.go"
UTILS: Final = "component/clusterd/pkg/domain/common/utils.go"
CODES: Final = "component/clusterd/pkg/domain/common/code.go"
CONST: Final = "component/clusterd/pkg/common/constant/const.go"
OPERATOR: Final = "component/ascend-operator/pkg/controllers/v1/job.go"
TASKD: Final = "component/taskd/taskd/python/framework/manager/controller.py"

ALL_WORDS: Final = ("retry", "recover", "dump", "downgrade")


@dataclass(frozen=True)
class Fault:
    pod: int  # pod rank (rank 0 = the rank-0 pod); the process rank is pod * 8
    type: str = "normal"  # uce / hccl / normal / node
    level: str | None = None  # None = the injector's default for the type


UCE: Final = Fault(1, "uce", "RestartBusiness")
HCCL: Final = Fault(1, "hccl", "RestartRequest")
NORMAL: Final = Fault(1, "normal", "SeparateNPU")
BUSINESS: Final = Fault(1, "normal", "")  # a software fault MindIO caught in the process
RESTART_REQUEST: Final = Fault(1, "normal", "RestartRequest")
NODE: Final = Fault(1, "node", "SeparateFault")
SUBHEALTH: Final = Fault(1, "normal", "SubHealthFault")
RANK0: Final = Fault(0, "normal", "SeparateNPU")


@dataclass(frozen=True)
class Outcome:
    """What ClusterD did with one event: expected by a scenario, observed by each runner."""

    strategies: tuple[str, ...] = ()  # the strategies chosen, in order
    statuses: tuple[str, ...] = ()  # the ProcessRecoverStatus values written
    codes: tuple[int, ...] = ()
    init: int = 0  # the Init code
    rescheduled: str | None = None  # job / pod / failed / None (training continues)


@dataclass(frozen=True)
class Scenario:
    id: str
    src: tuple[str, ...]
    strategies: str | None  # recover-strategy on the AscendJob; None = absent
    faults: tuple[Fault, ...] = (NORMAL,)
    labels: dict[str, str] = field(default_factory=dict)  # on the AscendJob (copied to the PodGroup)
    annotations: dict[str, str] = field(default_factory=dict)
    release: str = "26.1"
    fault_scheduling: str = "grace"  # grace / off
    live: dict[str, dict[str, str | None]] = field(default_factory=dict)  # PodGroup patch after Init
    agent: tuple[str, ...] = ALL_WORDS
    results: tuple[bool | int, ...] = (True,)  # per attempt; the last repeats
    platform: str | None = None  # platform mode: the standing and final answer; None = none (508)
    rank_table: str | None = "true"  # RankTableReady when platform mode answers recover
    spare: bool = True  # enough free resources for rescheduling
    expected: Outcome = Outcome()
    framework: str = "pytorch"

    @property
    def platform_mode(self) -> bool:
        return "ProcessRecoverStrategy" in self.annotations


def _s(**kw: object) -> Scenario:
    return Scenario(**kw)  # type: ignore[arg-type]


# The outcomes many scenarios share. A strategy that succeeds at once writes its own success status
# (recover-in-place reports recover-success, scale-in writes none); dump and exit end with the job
# rescheduled unless the scenario says otherwise.
RETRY_OK: Final = Outcome(("retry",), ("retry-success",))
RECOVER_OK: Final = Outcome(("recover",), ("recover-success",))
IN_PLACE_OK: Final = Outcome(("recover-in-place",), ("recover-success",))
SCALED_IN: Final = Outcome(("elastic-training",))


def dumped(rescheduled: str = "job") -> Outcome:
    return Outcome(("dump",), ("dump-success",), rescheduled=rescheduled)


def exited(rescheduled: str = "job") -> Outcome:
    return Outcome(("exit",), ("exit-completed",), rescheduled=rescheduled)


def refused_at_init(rescheduled: str = "job") -> Outcome:
    """Init refused (403): ClusterD never recovers the job in place; only rescheduling is left."""
    return Outcome(init=403, rescheduled=rescheduled)


def no_platform_answer(rescheduled: str = "job") -> Outcome:
    """Platform mode with no answer in time: code 508 and no strategy."""
    return Outcome(codes=(508,), rescheduled=rescheduled)


PLAT = {"ProcessRecoverStrategy": ""}
PLAT_READY = {"ProcessRecoverStrategy": "", "RankTableReady": "true"}
S_FIRST = f"{CTL}:1096-1106"
S_RESTART_FAIL = f"{CTL}:1108-1119"
S_SCALE_IN = f"{CTL}:1121-1135"
S_RETRY_FAIL = f"{CTL}:1137-1151"
S_RECOVER_FAIL = f"{CTL}:1153-1158"
S_CHOOSE = f"{CTL}:1164-1192"
S_RESULT = f"{CTL}:1415-1462"
S_RETRY_CODES = f"{CTL}:1422-1435"
S_SCALE_RESULT = f"{CTL}:1464-1500"
S_FAULT_RETRY = f"{CTL}:1534-1566"
S_DUMP_EXIT = f"{CTL}:1446-1458"
S_SUPPORT = f"{CTL}:364-428"
S_DUMP_FOR_FAULT = f"{CTL}:430-470"
S_PLAT_WAIT = f"{CTL}:664-690"
S_RANK_TABLE = f"{CTL}:1219-1233"
S_IN_PLACE = f"{CTL}:2138-2150"
S_INIT = f"{SVC}:570-592"
S_INIT_OFF = f"{SVC}:550-555"
S_CONFIG = f"{UTILS}:100-140"
S_AGENT = f"{CTL}:388-401"

SCENARIOS: Final[list[Scenario]] = [
    # --- §1: the Init snapshot -----------------------------------------------------------------------
    _s(
        id="init-snapshot-strategy-change-ignored",
        src=(S_INIT, S_CONFIG, S_FIRST),
        strategies="retry,recover,dump",
        faults=(UCE,),
        live={"annotations": {"recover-strategy": "dump"}},
        expected=RETRY_OK,
    ),
    _s(
        id="init-snapshot-dump-only-change-ignored",
        src=(S_INIT, S_CONFIG, S_RESTART_FAIL),
        strategies="dump",
        faults=(NORMAL,),
        live={"annotations": {"recover-strategy": "retry,recover"}},
        expected=dumped(),
    ),
    _s(
        id="init-refused-strategy-pushed-later",
        src=(S_INIT_OFF, f"{OPERATOR}:428-491", f"{CODES}:28"),
        strategies=None,
        faults=(UCE,),
        live={"annotations": {"recover-strategy": "retry,recover,dump"}},
        expected=refused_at_init(),
    ),
    _s(
        id="init-refused-label-pushed-later",
        src=(S_INIT_OFF, S_INIT),
        strategies=None,
        faults=(NORMAL,),
        live={"labels": {"process-recover-enable": "on"}, "annotations": {"recover-strategy": "recover"}},
        expected=refused_at_init(),
    ),
    _s(
        id="init-label-removed-after-init",
        src=(S_INIT, S_CONFIG),
        strategies="recover,dump",
        faults=(NORMAL,),
        live={"labels": {"process-recover-enable": None}},
        expected=RECOVER_OK,
    ),
    _s(
        id="init-label-paused-after-init",
        src=(S_INIT, S_CONFIG),
        strategies="retry",
        faults=(UCE,),
        live={"labels": {"process-recover-enable": "off"}},
        expected=RETRY_OK,
    ),
    _s(
        id="init-release-7.1-operator-sets-no-label",
        src=(S_INIT_OFF, f"{OPERATOR}:428-491"),
        strategies="retry,recover,dump",
        release="7.1",
        faults=(UCE,),
        expected=refused_at_init(),
    ),
    _s(
        id="init-no-strategy-no-rescheduling-fails",
        src=(S_INIT_OFF,),
        strategies=None,
        fault_scheduling="off",
        faults=(NORMAL,),
        expected=refused_at_init("failed"),
    ),
    _s(
        id="init-hotswitch-accepted-without-label",
        src=(S_INIT_OFF, f"{UTILS}:130-138"),
        strategies=None,
        labels={"subHealthyStrategy": "hotSwitch"},
        faults=(),
        expected=Outcome(init=0),
    ),
    _s(
        id="init-exit-always-added",
        src=(f"{UTILS}:122", S_FIRST),
        strategies="",
        faults=(NORMAL,),
        expected=exited(),
    ),
    _s(
        id="init-names-with-spaces-dropped",
        src=(f"{UTILS}:107-113",),
        strategies="retry, recover",
        faults=(NORMAL,),
        expected=exited(),
    ),
    _s(
        id="init-unknown-names-dropped",
        src=(f"{UTILS}:107-113", f"{UTILS}:31-38"),
        strategies="retry,migrate",
        faults=(UCE,),
        expected=RETRY_OK,
    ),
    _s(
        id="init-fault-scheduling-snapshot-gates-scale-in",
        src=(f"{UTILS}:114-118", S_SCALE_IN),
        strategies="elastic-training,dump",
        faults=(NORMAL,),
        expected=dumped(),
    ),
    _s(
        id="init-fault-scheduling-off-allows-scale-in",
        src=(f"{UTILS}:114-118", S_SCALE_IN),
        strategies="elastic-training,dump",
        fault_scheduling="off",
        faults=(NORMAL,),
        live={"labels": {"fault-scheduling": "grace"}},
        expected=SCALED_IN,
    ),
    _s(
        id="init-pod-rescheduling-snapshot",
        src=(f"{UTILS}:119-121", S_SCALE_IN),
        strategies="elastic-training,dump",
        fault_scheduling="off",
        labels={"pod-rescheduling": "on"},
        faults=(NORMAL,),
        expected=dumped("pod"),
    ),
    _s(
        id="init-platform-mode-removed-after-init",
        src=(f"{UTILS}:106", S_PLAT_WAIT),
        strategies="retry,recover",
        annotations=PLAT,
        faults=(UCE,),
        live={"annotations": {"ProcessRecoverStrategy": None}},
        expected=no_platform_answer(),
    ),
    _s(
        id="init-platform-mode-added-after-init",
        src=(f"{UTILS}:106", S_FIRST),
        strategies="retry,recover",
        faults=(UCE,),
        live={"annotations": {"ProcessRecoverStrategy": "dump"}},
        expected=RETRY_OK,
    ),
    _s(
        id="init-subhealthy-graceexit-snapshot",
        src=(f"{UTILS}:130-138", S_DUMP_FOR_FAULT),
        strategies="dump",
        labels={"subHealthyStrategy": "graceExit"},
        faults=(SUBHEALTH,),
        live={"labels": {"subHealthyStrategy": "ignore"}},
        agent=("retry", "recover"),
        expected=dumped(),
    ),
    # --- §2: platform mode at the engine level -------------------------------------------------------
    _s(
        id="plat-no-standing-answer-508",
        src=(S_PLAT_WAIT, S_FAULT_RETRY, f"{CODES}:75"),
        strategies="retry,recover,dump",
        annotations=PLAT,
        faults=(UCE,),
        expected=no_platform_answer(),
    ),
    _s(
        id="plat-508-pod-rescheduling",
        src=(S_PLAT_WAIT, S_FAULT_RETRY),
        strategies="recover",
        annotations=PLAT,
        labels={"pod-rescheduling": "on"},
        faults=(NORMAL,),
        expected=no_platform_answer("pod"),
    ),
    _s(
        id="plat-508-nothing-reschedules",
        src=(S_PLAT_WAIT, S_FAULT_RETRY),
        strategies="recover",
        annotations=PLAT,
        fault_scheduling="off",
        faults=(NORMAL,),
        expected=no_platform_answer("failed"),
    ),
    _s(
        id="plat-508-writes-no-exit-completed",
        src=(S_FAULT_RETRY, S_RESULT),
        strategies="dump",
        annotations=PLAT,
        faults=(NODE,),
        expected=no_platform_answer(),
    ),
    _s(
        id="plat-retry",
        src=(S_SUPPORT, S_FIRST),
        strategies="retry,recover,dump",
        annotations=PLAT,
        platform="retry",
        faults=(UCE,),
        expected=RETRY_OK,
    ),
    _s(
        id="plat-recover-rank-table-true",
        src=(S_SUPPORT, S_RANK_TABLE),
        strategies="retry,recover,dump",
        annotations=PLAT_READY,
        platform="recover",
        faults=(NORMAL,),
        expected=RECOVER_OK,
    ),
    _s(
        id="plat-recover-rank-table-absent",
        src=(S_RANK_TABLE, S_RECOVER_FAIL),
        strategies="recover,dump",
        annotations=PLAT,
        platform="recover",
        rank_table=None,
        faults=(NORMAL,),
        expected=Outcome(("recover", "exit"), ("exit-completed",), rescheduled="job"),
    ),
    _s(
        id="plat-dump",
        src=(S_SUPPORT, S_RESTART_FAIL, S_DUMP_EXIT),
        strategies="retry,recover,dump",
        annotations=PLAT,
        platform="dump",
        faults=(NORMAL,),
        expected=dumped(),
    ),
    _s(
        id="plat-retry-not-configured",
        src=(f"{CTL}:364-370", S_RESTART_FAIL),
        strategies="recover,dump",
        annotations=PLAT,
        platform="retry",
        faults=(UCE,),
        expected=exited(),
    ),
    _s(
        id="plat-recover-agent-lacks-recover",
        src=(f"{CTL}:376-386", S_RESTART_FAIL),
        strategies="recover,dump",
        annotations=PLAT_READY,
        platform="recover",
        agent=("retry", "dump"),
        faults=(NORMAL,),
        expected=exited(),
    ),
    _s(
        id="plat-scale-in-not-gated",
        src=(S_SCALE_IN, S_SUPPORT),
        strategies="retry,elastic-training",
        annotations=PLAT,
        platform="retry",
        fault_scheduling="off",
        faults=(NORMAL,),
        expected=SCALED_IN,
    ),
    _s(
        id="plat-retry-answer-normal-fault",
        src=(S_FIRST, S_RESTART_FAIL),
        strategies="retry,recover,dump",
        annotations=PLAT,
        platform="retry",
        faults=(NORMAL,),
        expected=exited(),
    ),
    _s(
        id="plat-dump-for-fault",
        src=(S_DUMP_FOR_FAULT, S_PLAT_WAIT),
        strategies="recover,dump",
        annotations=PLAT,
        platform="dump",
        faults=(NODE,),
        agent=("recover",),
        expected=dumped(),
    ),
    _s(
        id="plat-in-place-needs-recover-answer",
        src=(f"{CTL}:414-416", f"{CTL}:376-386"),
        strategies="recover-in-place,dump",
        annotations=PLAT,
        platform="dump",
        faults=(BUSINESS,),
        expected=dumped(),
    ),
    _s(
        id="plat-in-place-with-recover-answer",
        src=(f"{CTL}:414-416", f"{CTL}:1305-1310"),
        strategies="recover-in-place,recover",
        annotations=PLAT,
        platform="recover",
        faults=(BUSINESS,),
        expected=IN_PLACE_OK,
    ),
    # --- §3: first choice ----------------------------------------------------------------------------
    _s(
        id="uce-retry",
        src=(S_FIRST, S_RESULT),
        strategies="retry,recover,dump",
        faults=(UCE,),
        expected=RETRY_OK,
    ),
    _s(
        id="hccl-retry",
        src=(S_FIRST, f"{CONST}:204-209"),
        strategies="retry,recover",
        faults=(HCCL,),
        expected=RETRY_OK,
    ),
    _s(
        id="normal-recover",
        src=(S_FIRST, S_RESTART_FAIL),
        strategies="retry,recover,dump",
        faults=(NORMAL,),
        expected=RECOVER_OK,
    ),
    _s(
        id="node-fault-recover",
        src=(S_FIRST, S_RESTART_FAIL),
        strategies="retry,recover",
        faults=(NODE,),
        expected=RECOVER_OK,
    ),
    _s(
        id="uce-without-retry-recover",
        src=(S_FIRST, S_RESTART_FAIL),
        strategies="recover,dump",
        faults=(UCE,),
        expected=RECOVER_OK,
    ),
    _s(
        id="retry-agent-lacks-retry-dump",
        src=(S_CHOOSE, S_RECOVER_FAIL),
        strategies="retry,recover,dump",
        faults=(UCE,),
        agent=("recover", "dump"),
        expected=dumped(),
    ),
    _s(
        id="retry-agent-lacks-retry-and-dump",
        src=(S_CHOOSE, S_RECOVER_FAIL),
        strategies="retry,recover,dump",
        faults=(UCE,),
        agent=("recover",),
        expected=exited(),
    ),
    _s(
        id="in-place-business-fault",
        src=(S_FIRST, f"{CTL}:1305-1310", S_IN_PLACE),
        strategies="recover-in-place,recover",
        faults=(BUSINESS,),
        expected=IN_PLACE_OK,
    ),
    _s(
        id="in-place-restart-request",
        src=(S_FIRST, S_IN_PLACE),
        strategies="recover-in-place,recover",
        faults=(RESTART_REQUEST,),
        expected=IN_PLACE_OK,
    ),
    _s(
        id="in-place-not-for-separate",
        src=(S_FIRST, S_IN_PLACE),
        strategies="recover-in-place,recover",
        faults=(NORMAL,),
        expected=RECOVER_OK,
    ),
    _s(
        id="in-place-not-for-software-faults-on-two-pods",
        src=(S_IN_PLACE,),
        strategies="recover-in-place,recover",
        faults=(Fault(0, "normal", ""), Fault(1, "normal", "")),
        expected=RECOVER_OK,
    ),
    _s(
        id="in-place-agent-word-recover",
        src=(f"{CTL}:376-386", f"{CTL}:414-416"),
        strategies="recover-in-place,dump",
        faults=(BUSINESS,),
        agent=("dump",),
        expected=dumped(),
    ),
    _s(
        id="scale-in-first",
        src=(S_SCALE_IN, S_AGENT, f"{CONST}:53", S_SCALE_RESULT),
        strategies="elastic-training,dump",
        fault_scheduling="off",
        faults=(NORMAL,),
        expected=SCALED_IN,
    ),
    _s(
        id="scale-in-never-with-rank0-faulty",
        src=(S_SCALE_IN, f"{CONST}:385-386"),
        strategies="elastic-training,dump",
        fault_scheduling="off",
        faults=(RANK0,),
        expected=dumped("failed"),
    ),
    _s(
        id="scale-in-rescheduling-with-resources",
        src=(S_SCALE_IN,),
        strategies="elastic-training",
        faults=(NORMAL,),
        expected=exited(),
    ),
    _s(
        id="scale-in-rescheduling-without-resources",
        src=(S_SCALE_IN,),
        strategies="elastic-training",
        faults=(NORMAL,),
        spare=False,
        expected=SCALED_IN,
    ),
    _s(
        id="scale-in-agent-lacks-downgrade",
        src=(S_AGENT, S_SCALE_IN, TASKD + ":239-250"),
        strategies="elastic-training,dump",
        fault_scheduling="off",
        faults=(NORMAL,),
        agent=("retry", "recover", "dump"),
        expected=dumped("failed"),
    ),
    _s(
        id="scale-in-not-configured",
        src=(S_AGENT,),
        strategies="dump",
        fault_scheduling="off",
        faults=(NORMAL,),
        expected=dumped("failed"),
    ),
    _s(
        id="dump-only-healthy",
        src=(S_RESTART_FAIL, S_DUMP_EXIT),
        strategies="dump",
        faults=(BUSINESS,),
        expected=dumped(),
    ),
    _s(
        id="dump-for-fault-unhealthy-agent-not-asked",
        src=(S_DUMP_FOR_FAULT, f"{CTL}:676-681"),
        strategies="dump",
        faults=(NODE,),
        agent=("retry",),
        expected=dumped(),
    ),
    _s(
        id="dump-healthy-agent-lacks-dump",
        src=(f"{CTL}:418-428", S_RESTART_FAIL),
        strategies="dump",
        faults=(BUSINESS,),
        agent=("retry",),
        expected=exited(),
    ),
    _s(
        id="dump-subhealthy-without-graceexit",
        src=(S_DUMP_FOR_FAULT, S_RESTART_FAIL),
        strategies="dump",
        faults=(SUBHEALTH,),
        agent=("retry",),
        expected=exited(),
    ),
    _s(
        id="exit-only-pod-rescheduling",
        src=(S_FIRST, f"{UTILS}:119-121"),
        strategies="exit",
        labels={"pod-rescheduling": "on"},
        fault_scheduling="off",
        faults=(NORMAL,),
        expected=exited("pod"),
    ),
    _s(
        id="exit-pod-rescheduling-rank0-job-level",
        src=(S_FIRST,),
        strategies="exit",
        labels={"pod-rescheduling": "on"},
        faults=(RANK0,),
        expected=exited(),
    ),
    # --- §3: fallbacks and codes ---------------------------------------------------------------------
    _s(
        id="retry-405-then-recover",
        src=(S_RETRY_CODES, S_RETRY_FAIL, f"{CODES}:32"),
        strategies="retry,recover,dump",
        faults=(Fault(1, "uce", "SeparateNPU"),),
        results=(405, True),
        expected=Outcome(("retry", "recover"), ("retry-failed", "recover-success"), (405,)),
    ),
    _s(
        id="retry-406-drops-recover",
        src=(S_RETRY_CODES, S_RETRY_FAIL, f"{CODES}:34"),
        strategies="retry,recover,dump",
        faults=(UCE,),
        results=(406, True),
        expected=Outcome(("retry", "dump"), ("retry-failed", "dump-success"), (406,), rescheduled="job"),
    ),
    _s(
        id="retry-499-drops-recover-and-dump",
        src=(S_RETRY_CODES, f"{CODES}:52"),
        strategies="retry,recover,dump",
        faults=(UCE,),
        results=(499,),
        expected=Outcome(("retry", "exit"), ("retry-failed", "exit-completed"), (499,), rescheduled="job"),
    ),
    _s(
        id="retry-406-then-scale-in",
        src=(S_RETRY_CODES, S_RETRY_FAIL, S_SCALE_IN),
        strategies="retry,recover,elastic-training",
        fault_scheduling="off",
        faults=(UCE,),
        results=(406, True),
        expected=Outcome(("retry", "elastic-training"), ("retry-failed",), (406,)),
    ),
    _s(
        id="retry-405-then-in-place",
        src=(S_RETRY_CODES, S_RETRY_FAIL, S_IN_PLACE),
        strategies="retry,recover-in-place,recover",
        faults=(UCE,),
        results=(405, True),
        expected=Outcome(("retry", "recover-in-place"), ("retry-failed", "recover-success"), (405,)),
    ),
    _s(
        id="retry-406-no-in-place",
        src=(S_RETRY_CODES, f"{CTL}:414-416"),
        strategies="retry,recover-in-place,dump",
        faults=(UCE,),
        results=(406, True),
        expected=Outcome(("retry", "dump"), ("retry-failed", "dump-success"), (406,), rescheduled="job"),
    ),
    _s(
        id="in-place-failed-then-dump",
        src=(f"{CTL}:1305-1310", S_RESULT, S_RECOVER_FAIL),
        strategies="recover-in-place,recover,dump",
        faults=(BUSINESS,),
        results=(False, True),
        expected=Outcome(
            ("recover-in-place", "dump"), ("recover-failed", "dump-success"), (499,), rescheduled="job"
        ),
    ),
    _s(
        id="in-place-failed-no-dump-exit",
        src=(S_RESULT, S_RECOVER_FAIL),
        strategies="recover-in-place,recover",
        faults=(BUSINESS,),
        results=(False,),
        expected=Outcome(
            ("recover-in-place", "exit"), ("recover-failed", "exit-completed"), (499,), rescheduled="job"
        ),
    ),
    _s(
        id="recover-failed-then-dump",
        src=(S_RESULT, S_RECOVER_FAIL, S_DUMP_EXIT),
        strategies="recover,dump",
        faults=(NORMAL,),
        results=(False, True),
        expected=Outcome(("recover", "dump"), ("recover-failed", "dump-success"), (499,), rescheduled="job"),
    ),
    _s(
        id="recover-and-dump-failed",
        src=(S_RESULT, S_DUMP_EXIT),
        strategies="recover,dump",
        faults=(NORMAL,),
        results=(False,),
        expected=Outcome(
            ("recover", "dump"), ("recover-failed", "dump-failed"), (499, 499), rescheduled="job"
        ),
    ),
    _s(
        id="recover-failed-no-dump-exit",
        src=(S_RESULT, S_RECOVER_FAIL),
        strategies="recover",
        faults=(NORMAL,),
        results=(False,),
        expected=Outcome(
            ("recover", "exit"), ("recover-failed", "exit-completed"), (499,), rescheduled="job"
        ),
    ),
    _s(
        id="scale-in-failed-then-dump",
        src=(S_SCALE_RESULT, S_RECOVER_FAIL),
        strategies="elastic-training,dump",
        fault_scheduling="off",
        labels={"pod-rescheduling": "on"},
        spare=False,
        faults=(NORMAL,),
        results=(False, True),
        expected=Outcome(("elastic-training", "dump"), ("dump-success",), (499,), rescheduled="pod"),
    ),
    _s(
        id="scale-in-failed-no-dump-exit",
        src=(S_SCALE_RESULT, S_RECOVER_FAIL),
        strategies="elastic-training",
        spare=False,
        faults=(NORMAL,),
        results=(False,),
        expected=Outcome(("elastic-training", "exit"), ("exit-completed",), (499,), rescheduled="job"),
    ),
    _s(
        id="retry-405-recover-failed-dump",
        src=(S_RETRY_CODES, S_RECOVER_FAIL),
        strategies="retry,recover,dump",
        faults=(Fault(1, "uce", "SeparateNPU"),),
        results=(405, False, True),
        expected=Outcome(
            ("retry", "recover", "dump"),
            ("retry-failed", "recover-failed", "dump-success"),
            (405, 499),
            rescheduled="job",
        ),
    ),
    _s(
        id="dump-failed-no-exit-completed",
        src=(S_DUMP_EXIT, S_RESULT),
        strategies="dump",
        faults=(BUSINESS,),
        results=(False,),
        expected=Outcome(("dump",), ("dump-failed",), (499,), rescheduled="job"),
    ),
]


def sources() -> list[str]:
    """Every cited source line range, once, sorted."""
    return sorted({src for scenario in SCENARIOS for src in scenario.src})

"""ClusterD's recovery-strategy choice as a pure, deterministic function, read from the real source.

No I/O, no clock, no randomness: given the recovery config ClusterD snapshotted at the job's first
``Init`` (``RecoveryPolicy``), the strategies the agent reported, the faults, the platform's answers
and an oracle for the result of each attempt, ``plan`` returns the ordered ``Step``s ClusterD takes.
The simulated ClusterD executes those steps against the cluster; the what-if simulator prints them.

Every rule cites the MindCluster source (``Ascend/mind-cluster`` at 22bb3d98, paths under
``component/clusterd/pkg/``): ``controller.go`` is ``application/recover/controller.go``,
``utils.go`` is ``domain/common/utils.go``, ``const.go`` is ``common/constant/const.go``.

Typical use::

    policy = RecoveryPolicy.from_podgroup(labels, annotations)   # what Init snapshotted
    inputs = EngineInput(policy=policy, supported=frozenset({"retry", "recover", "dump"}),
                         faults=(RankFault(rank=8, pod_rank=1, node="node-2", fault_type=FAULT_UCE),))
    steps = plan(inputs, outcome=lambda strategy, attempt: True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from mindcluster import faults as vocab
from mindcluster import keys as k
from mindcluster.faults import FAULT_HCCL, FAULT_OTHER, FAULT_UCE
from mindcluster.releases import DEFAULT_RELEASE, RELEASES, release_at_least
from mindcluster.strategies import STRATEGY_PRIORITY

# --- fault vocabulary (the names themselves: mindcluster.faults) ------------------------------------
RETRY_FAULT_TYPES: Final = frozenset({FAULT_UCE, FAULT_HCCL})  # anything but NormalFaultType (utils.go:431)

# Chip handling levels for which recover-in-place restarts only the processes.
IN_PLACE_LEVELS: Final = frozenset({vocab.RESTART_REQUEST, vocab.RESTART_BUSINESS})
# Levels after which the faulty chip/node cannot keep training: the job is UnHealthy.
UNHEALTHY_LEVELS: Final = frozenset(
    {
        vocab.FREE_RESTART_NPU,
        vocab.RESTART_NPU,
        vocab.PRE_SEPARATE_NPU,
        vocab.SEPARATE_NPU,
        vocab.MANUALLY_SEPARATE_NPU,
        vocab.PRE_SEPARATE_FAULT,
        vocab.SEPARATE_FAULT,
    }
)
SUB_HEALTHY_LEVELS: Final = frozenset({vocab.SUB_HEALTH_FAULT})
# The recover service registers with the fault centre filtering these levels out: such faults never
# reach process recovery (fault_recover_service.go:64; job_fault_rank_processor.go:104-121; v7.3.0+).
FILTERED_LEVELS: Final = frozenset({vocab.NOT_HANDLE_FAULT, vocab.PRE_SEPARATE_NPU})
# hotSwitch: only these frameworks (fault_recover_service.go:355-360); more fault pods than this turn
# the snapshot to ignore (fault_recover_service.go:395-400, maxFaultPodLen).
HOT_SWITCH_FRAMEWORKS: Final = frozenset({"pytorch", "mindspore"})
MAX_HOT_SWITCH_FAULT_PODS: Final = 10
HOT_SWITCH_NEW_POD_WAIT_S: Final = 60.0  # monitorNewPodStatus: one minute (hot_switch_controller.go:79-81)
CHANGE_STRATEGY_MIGRATION: Final = "migration"  # constant.ProcessMigration (hot_switch_controller.go:146)
# wait-reschedule-timeout (controller.go:1668-1679): 30-270 s, anything else 270.
WAIT_RESCHEDULE_MIN_S: Final = 30
WAIT_RESCHEDULE_DEFAULT_S: Final = 270
CODE_SCHEDULE_TIMEOUT: Final = 503  # code.go:65
CODE_WAIT_REPORT_TIMEOUT: Final = 507  # WaitReportTimeout (code.go:72-73)
# Every wait for an agent report gives up after reportTimeoutMinutes = 15 (controller.go:36).
REPORT_TIMEOUT_S: Final = 15 * 60.0
# An attempt's outcome meaning "the agent never reports its result": ClusterD's 15-minute wait ends
# it (ReportTimeoutEvent). Real return codes are positive, so -1 cannot collide with one.
NO_REPORT: Final = -1
CODE_PROCESS_NOT_READY: Final = 404  # ProcessNotReady (code.go:29-30)
IN_PLACE_FAULT_WAIT_S: Final = 5 * 3.0  # JobFaultDisappearRetryTimes x JobFaultCheckPeriod (const.go:162-165)
PRE_EXIT_RELEASE: Final = "26.0"  # sendPreExitSignal arrived in v26.0.0 (commit 4d1c04d0)

# --- strategies -----------------------------------------------------------------------------------
PSEUDO_POD_RESCHEDULING: Final = "pod-rescheduling"
PSEUDO_JOB_RESCHEDULING: Final = "job-rescheduling"
# utils.go:31-38 gives only the process strategies a priority; the pseudo-strategies sort last.
_PRIORITY: Final = {**STRATEGY_PRIORITY, PSEUDO_POD_RESCHEDULING: 7, PSEUDO_JOB_RESCHEDULING: 8}
PROCESS_STRATEGIES: Final = ("retry", "recover-in-place", "recover", "elastic-training", "dump")

# The agent (TaskD / MindIO / Elastic Agent) reports these words in ReportRecoverStrategy; ClusterD
# checks recover-in-place against "recover" (controller.go:376-386) and elastic-training against
# ScaleInStrategyName = "downgrade" (controller.go:388-401, const.go:53).
AGENT_WORDS: Final = ("retry", "recover", "dump", "downgrade")
_AGENT_WORD: Final = {"recover-in-place": "recover", "elastic-training": "downgrade"}
# ProcessManageSignal.changeStrategy ClusterD sends for each strategy (const.go:38-55,
# controller.go:1307-1308: recover-in-place goes out as "recover").
CHANGE_STRATEGY_SIGNAL: Final = {
    "retry": "retry",
    "recover": "recover",
    "recover-in-place": "recover",
    "elastic-training": "downgrade",
    "dump": "dump",
    "exit": "exit",
    "upgrade": "upgrade",  # ScaleOutStrategyName (const.go:54-55), sent by waitScaleOut only
}
# Scale-out after a scale-in: not a strategy chooseStrategy picks, ClusterD's waitScaleOut sends it
# once the replacement pods run (controller.go:1978-2019).
SCALE_OUT: Final = "upgrade"
SCALE_OUT_EXTRA_PARAMS: Final = '{"scale-out-strategy": "DP"}'  # controller.go:2007
SCALE_OUT_POLL_S: Final = 5.0  # SleepSecondBeforeCheckPGRunning, no upper bound (controller.go:1983)
# ProcessRecoverStatus prefix per strategy (controller.go:1415-1458); None: ClusterD writes nothing
# (scale-in, controller.go:1464-1500).
_STATUS_NAME: Final[dict[str, str | None]] = {
    "retry": "retry",
    "recover": "recover",
    "recover-in-place": "recover",  # the agent reports it as "recover"
    "elastic-training": None,
    "upgrade": None,  # scale-out writes none either (controller.go:1500-1506)
    "dump": "dump",
}
SCALE_IN_EXTRA_PARAMS: Final = '{"scale-in-strategy": "DP"}'  # controller.go:1245
IN_PLACE_EXTRA_PARAMS: Final = "recover-in-place"  # controller.go:1307
ACTION_CHANGE_STRATEGY: Final = "change_strategy"
ACTION_FAULT_NODES_RESTART: Final = "fault_nodes_restart"  # const.go:345, controller.go:1309
DUMP_EXIT: Final = "dump_exit"  # const.go:183, sent by sendDumpExit (controller.go:1840-1850)

# Nominal simulated durations in seconds (retry fastest, process-level tens of seconds,
# rescheduling one to four minutes). The controller scales them with its clock.
PHASE_SECONDS: Final = {
    "detect": 3.0,
    "retry": 8.0,
    "hccl-route-convergence": 3.0,
    "recover-in-place": 25.0,
    "recover": 45.0,
    "elastic-training": 30.0,
    "upgrade": 30.0,
    "dump": 20.0,
    "exit": 5.0,
    "hot-switch": 30.0,
    "pod-reschedule": 70.0,
    "job-reschedule": 150.0,
}

# Return codes (domain/common/code.go:11-81).
CODE_OK: Final = 0
CODE_EXIT_ISOLATE_RANKS: Final = 201  # scale-in: isolate these ranks' nodes first (code.go:15)
CODE_PROCESS_RECOVER_ENABLE_OFF: Final = 403  # Init refused (fault_recover_service.go:550-555)
CODE_RECOVERABLE_RETRY_ERROR: Final = 405  # retry failed, flush faults again (controller.go:1428-1430)
CODE_UNRECOVERABLE_RETRY_ERROR: Final = 406  # retry failed, agent loses "recover" (controller.go:1431)
CODE_CLIENT_ERROR: Final = 499  # retry failed, agent loses "recover" and "dump" (controller.go:1432-1434)
WAIT_PLATFORM_STRATEGY_TIMEOUT_CODE: Final = 508  # code.go:75, controller.go:664-674
CODE_CONFIRM_FAULT_FAILED: Final = 509  # WriteConfirmFaultOrWaitPlatResultFault (code.go:76-77)
# A failed attempt reported without a code: for retry we take 405 (the agent could not step-retry
# but the process-level chain is intact); MindIO's real code is not in the public source.
DEFAULT_FAILURE_CODE: Final = {"retry": CODE_RECOVERABLE_RETRY_ERROR}
DEFAULT_OTHER_FAILURE_CODE: Final = CODE_CLIENT_ERROR
# ProcessRecoverStrategy values accepted before ClusterD writes ProcessConfirmFault
# (fault_recover_platform_plugin.go); exit is only accepted after ProcessResultFault.
PLATFORM_STANDING_ANSWERS: Final = ("retry", "recover", "dump")
PLATFORM_FINAL_ANSWERS: Final = ("retry", "recover", "dump", "exit")
LABEL_ON: Final = "on"
LABEL_PAUSE: Final = k.PROCESS_RECOVER_PAUSE

# Source lines the rules come from (cited in reasons and by the conformance table).
SRC: Final = {
    "init": "component/clusterd/pkg/application/recover/fault_recover_service.go:570-592",
    "init-off": "component/clusterd/pkg/application/recover/fault_recover_service.go:550-555",
    "config": "component/clusterd/pkg/domain/common/utils.go:100-140",
    "delete": "component/clusterd/pkg/application/recover/fault_recover_service.go:68-74",
    "first": "component/clusterd/pkg/application/recover/controller.go:1096-1106",
    "restart-fail": "component/clusterd/pkg/application/recover/controller.go:1108-1119",
    "scale-in": "component/clusterd/pkg/application/recover/controller.go:1121-1135",
    "retry-fail": "component/clusterd/pkg/application/recover/controller.go:1137-1151",
    "recover-fail": "component/clusterd/pkg/application/recover/controller.go:1153-1158",
    "retry-unsupported": "component/clusterd/pkg/application/recover/controller.go:1164-1183",
    "retry-support": "component/clusterd/pkg/application/recover/controller.go:364-370",
    "recover-support": "component/clusterd/pkg/application/recover/controller.go:376-386",
    "downgrade": "component/clusterd/pkg/application/recover/controller.go:388-401",
    "dump-support": "component/clusterd/pkg/application/recover/controller.go:418-428",
    "dump-for-fault": "component/clusterd/pkg/application/recover/controller.go:430-470",
    "platform-wait": "component/clusterd/pkg/application/recover/controller.go:664-674",
    "rank-table": "component/clusterd/pkg/application/recover/controller.go:1219-1233",
    "scale-in-wire": "component/clusterd/pkg/application/recover/controller.go:1244-1245",
    "in-place-wire": "component/clusterd/pkg/application/recover/controller.go:1305-1310",
    "in-place-pods": "component/clusterd/pkg/application/recover/controller.go:2138-2163",
    "in-place-soft": "component/clusterd/pkg/application/recover/controller.go:2146-2149",
    "result": "component/clusterd/pkg/application/recover/controller.go:1415-1462",
    "retry-codes": "component/clusterd/pkg/application/recover/controller.go:1422-1435",
    "scale-result": "component/clusterd/pkg/application/recover/controller.go:1464-1500",
    "fault-retry": "component/clusterd/pkg/application/recover/controller.go:1534-1566",
    "dump-exit": "component/clusterd/pkg/application/recover/controller.go:1840-1850",
    "schedule": "component/clusterd/pkg/application/recover/controller.go:1809-1827",
    "after-result": "component/clusterd/pkg/application/recover/rules.go:236-275",
    "exit-decided": "component/clusterd/pkg/application/recover/controller.go:1804-1807",
    "restart-all": "component/clusterd/pkg/application/recover/controller.go:1829-1838",
    "restart-wait": "component/clusterd/pkg/application/recover/controller.go:1866-1880",
    "fault-clear": "component/clusterd/pkg/application/recover/controller.go:692-701",
    "kill-master": "component/clusterd/pkg/application/recover/rules.go:264-271",
    "codes": "component/clusterd/pkg/domain/common/code.go:11-81",
    "filter": "component/clusterd/pkg/application/recover/fault_recover_service.go:64",
    "isolate-ranks": "component/clusterd/pkg/application/recover/controller.go:1468-1493",
    "isolate-rules": "component/clusterd/pkg/application/recover/rules.go:296-306",
    "sub-health-drop": "component/clusterd/pkg/application/recover/fault_recover_service.go:302-304",
    "sub-health-skip": "component/clusterd/pkg/application/recover/fault_recover_service.go:331-352",
    "hot-switch-gate": "component/clusterd/pkg/application/recover/fault_recover_service.go:354-405",
    "hot-switch-begin": "component/clusterd/pkg/application/recover/fault_recover_service.go:157-174",
    "hot-switch-rules": "component/clusterd/pkg/application/recover/rules.go:92-144",
    "hot-switch-prepare": "component/clusterd/pkg/application/recover/hot_switch_controller.go:20-59",
    "hot-switch-new-pod": "component/clusterd/pkg/application/recover/hot_switch_controller.go:61-95",
    "hot-switch-pause": "component/clusterd/pkg/application/recover/hot_switch_controller.go:151-187",
    "hot-switch-delete-old": "component/clusterd/pkg/application/recover/hot_switch_controller.go:109-123",
    "hot-switch-stop-job": "component/clusterd/pkg/application/recover/hot_switch_controller.go:125-137",
    "hot-switch-migration": "component/clusterd/pkg/application/recover/hot_switch_controller.go:139-149",
    "hot-switch-result": "component/clusterd/pkg/application/recover/hot_switch_controller.go:189-215",
    "hot-switch-clean": "component/clusterd/pkg/application/recover/hot_switch_controller.go:217-257",
    "soft-fault": "component/clusterd/pkg/application/recover/fault_recover_service.go:788-791",
    "pre-exit": "component/clusterd/pkg/application/recover/fault_recover_service.go:181-187",
    "pre-exit-signal": "component/clusterd/pkg/application/recover/fault_recover_service.go:199-231",
    "dump-for-fault-event": "component/clusterd/pkg/application/recover/controller.go:676-681",
    "save-and-exit": "component/clusterd/pkg/application/recover/controller.go:716-747",
    "dump-for-fault-rules": "component/clusterd/pkg/application/recover/rules.go:155-156",
    "listen-reschedule": "component/clusterd/pkg/application/recover/controller.go:1654-1702",
    "reschedule-timeout": "component/clusterd/pkg/application/recover/controller.go:1668-1679",
    "schedule-timeout": "component/clusterd/pkg/application/recover/controller.go:1764-1773",
    "schedule-timeout-rules": "component/clusterd/pkg/application/recover/rules.go:216-217",
    "scale-in-after-timeout": "component/clusterd/pkg/application/recover/rules.go:283-284",
    "in-place-live": "component/clusterd/pkg/domain/podgroup/pg_util.go:94-118",
    "in-place-wait": "component/clusterd/pkg/application/recover/controller.go:1331-1349",
    "in-place-check": "component/clusterd/pkg/application/recover/controller.go:1023-1030",
    "report-timeout": "component/clusterd/pkg/application/recover/controller.go:36",
    "retry-report-wait": "component/clusterd/pkg/application/recover/controller.go:1728-1750",
    "recover-report-wait": "component/clusterd/pkg/application/recover/controller.go:1752-1797",
    "report-wait": "component/clusterd/pkg/application/recover/controller.go:1945-1967",
    "retry-timeout-rules": "component/clusterd/pkg/application/recover/rules.go:211-212",
    "recover-timeout-rules": "component/clusterd/pkg/application/recover/rules.go:218-219",
    "dump-timeout-rules": "component/clusterd/pkg/application/recover/rules.go:225-226",
    "isolate-timeout-rules": "component/clusterd/pkg/application/recover/rules.go:293-294",
    "scale-in-timeout-rules": "component/clusterd/pkg/application/recover/rules.go:305-306",
    "stop-train": "component/clusterd/pkg/application/recover/controller.go:703-714",
    "stop-wait": "component/clusterd/pkg/application/recover/controller.go:749-775",
    "stop-timeout-rules": "component/clusterd/pkg/application/recover/rules.go:172-173",
    "stop-not-ready": "component/clusterd/pkg/application/recover/controller.go:767-768",
    "stop-not-ready-rules": "component/clusterd/pkg/application/recover/rules.go:174-175",
    "kill-job": "component/clusterd/pkg/application/recover/controller.go:1570-1595",
    "scale-in-running": "component/clusterd/pkg/application/recover/controller.go:1973-1976",
    "wait-scale-out": "component/clusterd/pkg/application/recover/controller.go:1978-2019",
    "scale-out-report": "component/clusterd/pkg/application/recover/controller.go:2021-2024",
    "scale-out-result": "component/clusterd/pkg/application/recover/controller.go:1500-1506",
    "scale-out-rules": "component/clusterd/pkg/application/recover/rules.go:307-320",
    "scale-out-timeout-rules": "component/clusterd/pkg/application/recover/rules.go:317-318",
    "strategy-wait": "component/clusterd/pkg/application/recover/controller.go:1604-1627",
    "strategy-timeout-rules": "component/clusterd/pkg/application/recover/rules.go:189-190",
    "global-fault": "component/clusterd/pkg/application/recover/controller.go:1001-1031",
    "global-fault-list": "component/clusterd/pkg/application/recover/controller.go:933-983",
    "retry-global-fault": "component/clusterd/pkg/application/recover/controller.go:870-886",
    "restart-fault-process": "component/clusterd/pkg/application/recover/controller.go:2102-2152",
    "in-place-live-gate": "component/clusterd/pkg/application/recover/controller.go:2102-2121",
    "scale-in-running-fault": "component/clusterd/pkg/application/recover/rules.go:322-323",
    "stop-train-handler": "component/clusterd/pkg/application/recover/controller.go:703-714",
    "choose-after-result": "component/clusterd/pkg/application/recover/controller.go:1183-1188",
    "controller-reset": "component/clusterd/pkg/application/recover/controller.go:286-290",
    "order-mix": "component/clusterd/pkg/application/recover/controller.go:474-479",
    "volcano-off": "component/ascend-for-volcano/internal/rescheduling/reschedule.go:108-114",
    "volcano-hot-switch-delete": "component/ascend-for-volcano/internal/rescheduling/task.go:57-72",
    "wait-old-pod-deleted": "component/clusterd/pkg/application/recover/rules.go:129-130",
}


class StepKind:
    """What a ``Step`` does. Plain strings so steps serialise and compare easily."""

    PLATFORM_TIMEOUT = "platform-timeout"  # no standing ProcessRecoverStrategy within 300 s → code 508
    RANK_TABLE_NOT_READY = "rank-table-not-ready"  # platform mode: RankTableReady is not "true"
    CHOOSE = "choose"  # a strategy was chosen (first choice or fallback)
    ATTEMPT = "attempt"  # changeStrategy / saveAndExit signal sent, waiting for ReportRecoverStatus
    SUCCEEDED = "succeeded"  # the attempt worked
    FAILED = "failed"  # the attempt failed (``code`` = the agent's code)
    REFLUSH = "reflush"  # retry failed with 405: ClusterD flushes the faults again
    EXIT = "exit"  # changeStrategy exit; no ProcessRecoverStatus (rules.go:202-203, controller.go:1804-1807)
    DUMP_EXIT = "dump-exit"  # changeStrategy exit with extraParams dump_exit (after dump / in fault-retry)
    PAUSE = "pause"  # PodGroup label process-recover-enable=pause (fault-retry only)
    POD_RESCHEDULE = "pod-reschedule"  # Pod-level rescheduling of the faulty pods (Volcano)
    JOB_RESCHEDULE = "job-reschedule"  # Job-level rescheduling: every pod recreated (Volcano)
    RESUME = "resume"  # PodGroup label process-recover-enable=on again (fault-retry only)
    LISTEN_SCHEDULE = "listen-schedule"  # after exit / dump: ≤20 s for the job (controller.go:1809-1827)
    RESTART_ALL_PROCESS = "restart-all-process"  # reset.json RetryTime+1 (controller.go:1829-1838)
    FAULT_CLEAR = "fault-clear"  # reset.json clear: RankList emptied (controller.go:692-701)
    KILL_MASTER = "kill-master"  # fault-retry found no running job within 135 s (rules.go:266-271)
    JOB_FAILED = "job-failed"  # nothing left to restart the job with
    DONE = "done"  # training runs again
    IGNORED = "ignored"  # the fault never reaches the recovery state machine (D3, D9)
    PRE_EXIT = "pre-exit"  # v26: preExitProcess to the fault pods instead of FaultOccurEvent (D5)
    RESCHEDULE_WAIT = "reschedule-wait"  # recover: wait-reschedule-timeout for the new pods (D7)
    HOT_SWITCH = "hot-switch"  # hotSwitch signal, fault pod annotated for a backup pod
    HOT_SWITCH_NEW_POD = "hot-switch-new-pod"  # ≤60 s for the backup pod; running → newPodRunning signal
    HOT_SWITCH_STOP = "hot-switch-stop"  # no backup pod within 60 s: hotSwitch stop signal
    DELETE_OLD_POD = "delete-old-pod"  # old pod: needVolcanoOpe=delete, fault-type=SubHealth
    STOP_JOB = "stop-job"  # rank-0 pod: needVolcanoOpe=delete, fault-type=SubHealth
    SUB_HEALTH_IGNORE = "sub-health-ignore"  # the snapshot's subHealthyStrategy becomes ignore
    FAULT_NODES_EXIT = "fault-nodes-exit"  # scale-in result 201: the isolated ranks' nodes exit
    REPORT_TIMEOUT = "report-timeout"  # no agent report within 15 min (controller.go:36), code 507
    RESTART_PODS = "restart-pods"  # v26 in-place: fault pods that cannot restart in place are recreated
    SCALE_OUT_WAIT = "scale-out-wait"  # ScaleInRunning: the fault pods' replacements run again
    # hotSwitch with fault-scheduling off: Volcano never deletes the pod annotated needVolcanoOpe=delete,
    # so ClusterD waits in WaitOldPodDeletedState, which has no timeout (rules.go:129-130).
    HOT_SWITCH_STUCK = "hot-switch-stuck"
    PROCESS_NOT_READY = "process-not-ready"  # stop-complete report with code 404 (controller.go:767-768)


# --- inputs ---------------------------------------------------------------------------------------
def parse_recover_strategy(annotation: str | None, labels: Mapping[str, str]) -> tuple[str, ...]:
    """Parse ``recover-strategy`` plus the rescheduling labels exactly like ClusterD (utils.go:107-123).

    Split on ``,`` with no trimming: unknown names and names with spaces are silently dropped.
    ``job-rescheduling`` is added when ``fault-scheduling`` is grace/force, ``pod-rescheduling`` when
    ``pod-rescheduling=on``, and ``exit`` always. The result is de-duplicated and in priority order.
    """
    names = [name for name in (annotation or "").split(",") if name in STRATEGY_PRIORITY]
    if labels.get(k.LABEL_FAULT_SCHEDULING) in ("grace", "force"):
        names.append(PSEUDO_JOB_RESCHEDULING)
    if labels.get(k.LABEL_POD_RESCHEDULING) == "on":
        names.append(PSEUDO_POD_RESCHEDULING)
    names.append("exit")
    return tuple(sorted(set(names), key=_PRIORITY.__getitem__))


def agent_words(names: Iterable[str]) -> frozenset[str]:
    """The agent's vocabulary for ``names``: product names (recover-in-place, elastic-training) map to
    the words the agent really reports (recover, downgrade); exit and unknown words are dropped."""
    words = {_AGENT_WORD.get(name, name) for name in names}
    return frozenset(w for w in words if w in AGENT_WORDS)


@dataclass(frozen=True)
class RankFault:
    """One faulty process rank, as ClusterD sees it after fault flushing."""

    rank: int  # global process rank (FaultRank.rankId)
    pod_rank: int  # hccl/rankIndex of the pod the rank runs in
    node: str
    fault_type: str = FAULT_OTHER  # FAULT_UCE / FAULT_OTHER / FAULT_HCCL
    level: str = ""  # chip/node handling level; "" = business-process exception (software fault)
    code: str = ""
    node_fault: bool = False  # the whole node is faulty (deviceId "-1")

    @property
    def business_process(self) -> bool:
        """A software fault caught by MindIO inside the container rather than reported by hardware."""
        return not self.level and not self.node_fault


def job_health(faults: tuple[RankFault, ...]) -> str:
    """``Healthy`` / ``SubHealthy`` / ``UnHealthy`` from the faults' handling levels.

    A software fault (``ReportProcessFault``, no chip level) that is not UCE/HCCL makes the job
    UnHealthy, "in order to be able to dump directly" (fault_recover_service.go:788-791)."""
    if any(fault.node_fault or fault.level in UNHEALTHY_LEVELS for fault in faults):
        return vocab.UNHEALTHY
    if any(fault.business_process and fault.fault_type not in RETRY_FAULT_TYPES for fault in faults):
        return vocab.UNHEALTHY
    if any(fault.level in SUB_HEALTHY_LEVELS for fault in faults):
        return vocab.SUB_HEALTHY
    return vocab.HEALTHY


@dataclass(frozen=True)
class RecoveryPolicy:
    """The recovery config ClusterD reads from the PodGroup at the job's first ``Init`` (utils.go:100-140)."""

    configured: tuple[str, ...] = ("exit",)  # parse_recover_strategy output (MindXConfigStrategies)
    process_recover_enable: str = ""  # PodGroup label: on / pause / off / ""
    platform_mode: bool = False  # ProcessRecoverStrategy annotation present (utils.go:106)
    sub_healthy_strategy: str = "ignore"
    # Set by ClusterD at run time, not read from the PodGroup: a failed hotSwitch turns HotSwitch off
    # and subHealthyStrategy to ignore until the PodGroup goes (hot_switch_controller.go:217-225);
    # the job stays initialised.
    hot_switch_off: bool = False

    @classmethod
    def from_podgroup(cls, labels: Mapping[str, str], annotations: Mapping[str, str]) -> RecoveryPolicy:
        """Build the policy from a PodGroup's (or job's) labels and annotations."""
        return cls(
            configured=parse_recover_strategy(annotations.get(k.ANNOTATION_RECOVER_STRATEGY), labels),
            process_recover_enable=labels.get(k.LABEL_PROCESS_RECOVER_ENABLE, ""),
            platform_mode=k.ANNOTATION_PLATFORM_STRATEGY in annotations,
            sub_healthy_strategy=labels.get(k.LABEL_SUB_HEALTHY_STRATEGY, "ignore"),
        )

    @property
    def job_rescheduling(self) -> bool:
        return PSEUDO_JOB_RESCHEDULING in self.configured

    @property
    def pod_rescheduling(self) -> bool:
        return PSEUDO_POD_RESCHEDULING in self.configured

    @property
    def process_strategies(self) -> tuple[str, ...]:
        """Configured process-level strategies (without exit and the pseudo-strategies)."""
        return tuple(s for s in self.configured if s in PROCESS_STRATEGIES)

    @property
    def process_recovery_on(self) -> bool:
        """ClusterD's ``ProcessRecoverEnable``: the label is exactly ``on`` (utils.go:124-129)."""
        return self.process_recover_enable == LABEL_ON

    @property
    def init_accepted(self) -> bool:
        """``Init`` succeeds only with process-recover-enable=on or subHealthyStrategy=hotSwitch
        (fault_recover_service.go:550-555); otherwise it returns 403 and ClusterD never runs its
        per-job recovery state machine for the job."""
        return self.process_recovery_on or self.sub_healthy_strategy == "hotSwitch"

    @classmethod
    def from_description(cls, data: Mapping[str, object]) -> RecoveryPolicy:
        """The inverse of ``describe`` (e.g. the config of an ``InitSuccess`` Event)."""
        strategies = data.get("strategies")
        configured = tuple(
            s
            for s in (strategies if isinstance(strategies, list) else [])
            if isinstance(s, str) and s in _PRIORITY
        )
        return cls(
            configured=tuple(sorted(set(configured) | {"exit"}, key=_PRIORITY.__getitem__)),
            process_recover_enable=str(data.get("process-recover-enable") or ""),
            platform_mode=bool(data.get("platform-mode")),
            sub_healthy_strategy=str(data.get("subHealthyStrategy") or "ignore"),
        )

    def describe(self) -> dict[str, object]:
        """The snapshot as plain data (for Events and the product)."""
        return {
            "strategies": list(self.configured),
            "process-recover-enable": self.process_recover_enable or None,
            "platform-mode": self.platform_mode,
            "subHealthyStrategy": self.sub_healthy_strategy,
        }


@dataclass(frozen=True)
class EngineInput:
    """Everything the choice depends on, frozen at fault time."""

    policy: RecoveryPolicy  # the Init snapshot
    supported: frozenset[str]  # ReportRecoverStrategy: agent words (product names are mapped)
    faults: tuple[RankFault, ...]
    platform_choice: str | None = None  # ProcessRecoverStrategy re-read after ProcessResultFault
    platform_timed_out: bool = False  # no standing answer within 300 s (code 508)
    spare_resources: bool = True  # a free node exists for migration / rescheduling
    restart_budget: int | None = None  # Job/Pod reschedules left; None = unlimited
    rank_table_ready: bool = True  # platform mode: RankTableReady is exactly "true"
    platform_standing: str | None = None  # the answer at step 1; None = same as platform_choice
    framework: str = "pytorch"  # the job's framework (hotSwitch: PyTorch and MindSpore only)
    release: str = DEFAULT_RELEASE  # the job's MindCluster release (v26 preExit, v7.3 level filter)
    wait_reschedule_s: int = WAIT_RESCHEDULE_DEFAULT_S  # live wait-reschedule-timeout (parsed)
    live_in_place: bool | None = None  # live PodGroup allows recover-in-place (pg_util.go:94-118)
    # The agent's ReportStopComplete after stopTrain: CODE_OK, NO_REPORT (silent: ClusterD waits
    # 15 min) or CODE_PROCESS_NOT_READY (404 → killMaster); any other code counts as received
    # (controller.go:749-775).
    stop_report: int = CODE_OK
    strategy_reported: bool = True  # False: no ReportRecoverStrategy within 15 min (rules.go:189-190)
    # After a scale-in success: the fault pods' replacements come up and the PodGroup runs again, so
    # ClusterD sends the scale-out (controller.go:1978-2019). False: it polls on, unbounded.
    scale_out: bool = False
    # The faults of a scale-in the job still runs without (ClusterD in ScaleInRunningState, no
    # scale-out yet): this event's FaultOccurEvent goes straight to stopTrain (rules.go:322-323) and
    # the scale-in's faults are still in the cache (controller.go:204-219, cleared only by reset).
    scaled_in: tuple[RankFault, ...] = ()

    @property
    def agent(self) -> frozenset[str]:
        return agent_words(self.supported)

    @property
    def rank0_faulty(self) -> bool:
        return any(f.pod_rank == 0 for f in self.faults)

    @property
    def faulty_pod_ranks(self) -> tuple[int, ...]:
        return tuple(sorted({f.pod_rank for f in self.faults}))

    @property
    def health(self) -> str:
        return job_health(self.faults)

    @property
    def standing_answer(self) -> str | None:
        return self.platform_standing if self.platform_standing is not None else self.platform_choice


# --- live keys ------------------------------------------------------------------------------------
def parse_wait_reschedule_timeout(value: str | None) -> int:
    """``wait-reschedule-timeout`` as listenScheduleResult reads it, live, per fault: an integer from
    30 to 270, anything else (absent, not a number, out of range) 270 (controller.go:1668-1679)."""
    try:
        seconds = int(value or "")
    except ValueError:
        return WAIT_RESCHEDULE_DEFAULT_S
    if WAIT_RESCHEDULE_MIN_S <= seconds <= WAIT_RESCHEDULE_DEFAULT_S:
        return seconds
    return WAIT_RESCHEDULE_DEFAULT_S


def live_in_place_allowed(labels: Mapping[str, str], annotations: Mapping[str, str]) -> bool:
    """judgeTargetRecoverStrategyByJobKey(…, recover-in-place) on the live PodGroup: label exactly
    ``on`` and ``recover-in-place`` among the comma-split, space-removed recover-strategy
    (pg_util.go:94-118)."""
    if labels.get(k.LABEL_PROCESS_RECOVER_ENABLE) != LABEL_ON:
        return False
    value = annotations.get(k.ANNOTATION_RECOVER_STRATEGY)
    if value is None:
        return False
    return "recover-in-place" in value.replace(" ", "").split(",")


# --- admission of a fault into the state machine ---------------------------------------------------
@dataclass(frozen=True)
class Admission:
    """What happens to a fault before the state machine sees it: ``ignore`` (filtered or skipped),
    ``hot-switch`` (BeginHotSwitchEvent), ``pre-exit`` (v26 preExitProcess, then ReportProcessFault)
    or ``occur`` (FaultOccurEvent). ``inputs`` carries the faults the machine will see."""

    kind: str
    inputs: EngineInput
    reason: str


def _supports_retry_at_fault(inputs: EngineInput) -> bool:
    """supportRetryStrategy when the fault centre's fault arrives (controller.go:364-370): in platform
    mode ``platStrategy`` is still empty then (set only in handleNotifyWaitFaultFlushing,
    controller.go:664-674), so retry never counts as supported — inferred, facts D5."""
    return "retry" in inputs.policy.configured and not inputs.policy.platform_mode


def _sub_health_gate(inputs: EngineInput) -> tuple[str, str, tuple[RankFault, ...]]:
    """skipHandleSubHealthyFaults (fault_recover_service.go:331-405) for a SubHealthy job."""
    policy = inputs.policy
    faults = inputs.faults
    strategy = "ignore" if policy.hot_switch_off else policy.sub_healthy_strategy
    if strategy == "hotSwitch":
        if inputs.framework not in HOT_SWITCH_FRAMEWORKS:
            return (
                "ignore",
                (
                    f"hotSwitch supports PyTorch and MindSpore only, not {inputs.framework!r}: the snapshot "
                    f"turns subHealthyStrategy to ignore ({SRC['hot-switch-gate']})"
                ),
                faults,
            )
        kept = tuple(f for f in faults if f.pod_rank != 0)
        if not kept:
            return "ignore", f"hotSwitch skips a fault of the rank-0 pod ({SRC['hot-switch-gate']})", faults
        if len({f.pod_rank for f in kept}) > MAX_HOT_SWITCH_FAULT_PODS:
            return (
                "ignore",
                (
                    f"more than {MAX_HOT_SWITCH_FAULT_PODS} fault pods: subHealthyStrategy turns ignore "
                    f"({SRC['hot-switch-gate']})"
                ),
                faults,
            )
        first = kept[0].pod_rank
        return (
            "hot-switch",
            (
                f"SubHealthy job in hotSwitch: BeginHotSwitchEvent for the first fault pod only "
                f"({SRC['hot-switch-gate']}, {SRC['hot-switch-begin']})"
            ),
            tuple(f for f in kept if f.pod_rank == first),
        )
    if strategy != "graceExit":
        return (
            "ignore",
            (
                f"SubHealthy fault skipped: subHealthyStrategy is {strategy!r}, neither "
                f"hotSwitch nor graceExit ({SRC['sub-health-skip']})"
            ),
            faults,
        )
    if not policy.process_recovery_on or policy.platform_mode or policy.configured[0] != "dump":
        why = (
            "platform mode's answer is not read yet at this point (platStrategy empty, controller.go:436-440)"
            if policy.platform_mode and policy.process_recovery_on
            else "the strategies do not start with dump (controller.go:430-457)"
        )
        return "ignore", f"SubHealthy fault skipped under graceExit: {why} ({SRC['sub-health-skip']})", faults
    return "occur", "", faults


def admit(inputs: EngineInput) -> Admission:
    """The fault centre's path into the recover service (fault_recover_service.go:64, 141-189, 302-304,
    331-405): level filter, sub-health skip / hotSwitch, v26 preExitProcess, else FaultOccurEvent."""
    faults = inputs.faults
    if release_at_least(inputs.release if inputs.release in RELEASES else DEFAULT_RELEASE, "7.3"):
        faults = tuple(f for f in faults if f.level not in FILTERED_LEVELS)
        if not faults:
            return Admission(
                "ignore",
                inputs,
                f"NotHandleFault / PreSeparateNPU faults are filtered before the recover service "
                f"({SRC['filter']})",
            )
    health = job_health(faults)
    if health != vocab.SUB_HEALTHY:
        faults = tuple(f for f in faults if f.level not in SUB_HEALTHY_LEVELS)  # svc:302-304
    inputs = replace(inputs, faults=faults)
    if health == vocab.SUB_HEALTHY:
        kind, reason, kept = _sub_health_gate(inputs)
        if kind != "occur":
            return Admission(kind, replace(inputs, faults=kept), reason)
    release = inputs.release if inputs.release in RELEASES else DEFAULT_RELEASE
    # Only the fault centre's faults take this path: hardware faults, and software UCE/HCCL faults,
    # which ReportProcessFault hands to the fault centre (fault_recover_service.go:792-798); any other
    # software fault fires FaultOccurEvent itself (fault_recover_service.go:788-791).
    hardware = any(not f.business_process or f.fault_type in RETRY_FAULT_TYPES for f in faults)
    only_retry = all(f.fault_type in RETRY_FAULT_TYPES for f in faults)
    if (
        hardware
        and release_at_least(release, PRE_EXIT_RELEASE)
        and not (_supports_retry_at_fault(inputs) and only_retry)
    ):
        # TaskD stops the fault pods' workers and reports them with ReportProcessFault as non-retry
        # faults, so the job is UnHealthy when the machine starts (svc:788-791) — inferred, facts D5.
        process = tuple(
            RankFault(rank=f.rank, pod_rank=f.pod_rank, node=f.node, fault_type=FAULT_OTHER) for f in faults
        )
        return Admission(
            "pre-exit",
            replace(inputs, faults=faults + process),
            f"v26: preExitProcess to the fault pods, no FaultOccurEvent; the machine starts from "
            f"ReportProcessFault ({SRC['pre-exit']}, {SRC['pre-exit-signal']}, {SRC['soft-fault']})",
        )
    return Admission("occur", inputs, "FaultOccurEvent")


@dataclass(frozen=True)
class Decision:
    """A chosen strategy and the rule that chose it."""

    strategy: str
    reason: str


@dataclass(frozen=True)
class Step:
    """One thing ClusterD does. ``reason`` cites the source line behind it."""

    kind: str
    strategy: str | None = None
    reason: str = ""
    label_changes: Mapping[str, str] = field(default_factory=dict)  # PodGroup labels to set
    budget_change: int = 0  # change of the Job/Pod restart budget
    recover_status: str | None = None  # PodGroup ProcessRecoverStatus to write
    signal: str | None = None  # ProcessManageSignal.signalType sent to the agent
    change_strategy: str | None = None  # ProcessManageSignal.changeStrategy (wire name)
    pod_ranks: tuple[int, ...] = ()  # pods affected (migration / rescheduling)
    duration_s: float = 0.0  # nominal simulated duration of the step
    code: int = 0  # ClusterD / agent return code, when the step is an error
    extra_params: str = ""  # ProcessManageSignal.extraParams
    actions: tuple[str, ...] = ()  # ProcessManageSignal.actions
    removed: tuple[str, ...] = ()  # agent words ClusterD dropped after this failure


# --- the rules ------------------------------------------------------------------------------------
@dataclass
class _State:
    """What changes while one fault event runs: the agent's list shrinks after failed retries."""

    agent: set[str]
    tried: list[str] = field(default_factory=list)


def _platform_is(inputs: EngineInput, answer: str) -> bool:
    return inputs.platform_choice == answer


def support_retry(inputs: EngineInput) -> bool:
    """Configured, and in platform mode the answer is retry; the agent is not asked here
    (controller.go:364-370)."""
    if "retry" not in inputs.policy.configured:
        return False
    return not inputs.policy.platform_mode or _platform_is(inputs, "retry")


def _support_recover_kind(inputs: EngineInput, state: _State, strategy: str) -> bool:
    """recover / recover-in-place: configured, agent reports ``recover``, platform answer recover
    (controller.go:376-386)."""
    if strategy not in inputs.policy.configured or "recover" not in state.agent:
        return False
    return not inputs.policy.platform_mode or _platform_is(inputs, "recover")


def support_dump(inputs: EngineInput, state: _State) -> bool:
    """Configured, agent reports ``dump``, platform answer dump (controller.go:418-428)."""
    if "dump" not in inputs.policy.configured or "dump" not in state.agent:
        return False
    return not inputs.policy.platform_mode or _platform_is(inputs, "dump")


def can_scale_in(inputs: EngineInput, state: _State) -> tuple[bool, str]:
    """canChooseScaleInStrategy (controller.go:1121-1135): never gated by the platform's answer."""
    if inputs.rank0_faulty:
        return False, "the rank-0 pod is faulty"
    if "elastic-training" not in inputs.policy.configured or "downgrade" not in state.agent:
        return False, "elastic-training is not configured or the agent does not report downgrade"
    rescheduling = inputs.policy.job_rescheduling or inputs.policy.pod_rescheduling
    if rescheduling and inputs.spare_resources:
        return False, "Job/Pod rescheduling is configured and there are enough resources"
    return True, ""


PER_POD_IN_PLACE_RELEASE: Final = "26.0"  # recoverInPlacePodFaults, per pod (controller.go:2124-2162)


def _in_place_able(fault: RankFault) -> bool:
    return fault.business_process or fault.level in IN_PLACE_LEVELS


def in_place_pods(
    faults: tuple[RankFault, ...], release: str = DEFAULT_RELEASE
) -> tuple[bool, tuple[int, ...]]:
    """``restartFaultProcess`` and the fault pods restarted as pods instead.

    v26.0.0+ keeps one entry per fault pod (updateRestartProcessOrPodInfo, controller.go:2124-2136):
    restartFaultProcess is true if *any* pod can restart in place (controller.go:2138-2145), except when
    only software faults hit more than one pod (controller.go:2146-2149); pods whose faults do not clear
    within the 15 s wait restart as pods (updateRecoverInPlaceInfoByRestartPods, controller.go:2154-2163,
    called at controller.go:1026-1030) while the rest restart in place. A pod counts as in-place-able
    when all its faults are business-process or RestartRequest/RestartBusiness (inferred: the other
    levels do not clear by themselves). Before v26.0.0 it is all or nothing: every fault must be
    in-place-able (CanRestartFaultProcess, v7.3.0 utils.go:458-468) and the 15 s wait failing drops
    in-place for the job (v7.3.0 controller.go:1045-1050); several software-only pods are allowed."""
    if not faults:
        return False, ()
    if not release_at_least(release if release in RELEASES else DEFAULT_RELEASE, PER_POD_IN_PLACE_RELEASE):
        return all(_in_place_able(f) for f in faults), ()
    pods = sorted({f.pod_rank for f in faults})
    as_pods = tuple(p for p in pods if not all(_in_place_able(f) for f in faults if f.pod_rank == p))
    if len(as_pods) == len(pods):
        return False, ()
    if all(f.business_process for f in faults) and len(pods) > 1:
        return False, ()
    return True, as_pods


def in_place_condition(faults: tuple[RankFault, ...], release: str = DEFAULT_RELEASE) -> bool:
    """``restartFaultProcess`` for these faults in this release (see ``in_place_pods``)."""
    return in_place_pods(faults, release)[0]


def _only_retry_faults(faults: tuple[RankFault, ...]) -> bool:
    return bool(faults) and all(f.fault_type in RETRY_FAULT_TYPES and not f.node_fault for f in faults)


def _support_in_place(inputs: EngineInput, state: _State, restart_fault_process: bool) -> bool:
    """supportRestartProcessStrategy (controller.go:414-416); restartFaultProcess also needs the live
    PodGroup to allow it (label on, recover-in-place in recover-strategy: pg_util.go:94-118)."""
    if inputs.live_in_place is False:
        return False
    return restart_fault_process and _support_recover_kind(inputs, state, "recover-in-place")


def _why_none(inputs: EngineInput, state: _State) -> str:
    parts = [
        f"configured={list(inputs.policy.process_strategies)}",
        f"agent reports={sorted(state.agent)}",
    ]
    if inputs.policy.platform_mode:
        parts.append(f"platform={inputs.platform_choice!r}")
    return "(" + ", ".join(parts) + ")"


def _choose_for_recover_fail(inputs: EngineInput, state: _State, why: str) -> Decision:
    """chooseForRecoverFail (controller.go:1153-1158): dump, else exit."""
    if support_dump(inputs, state):
        return Decision("dump", f"{why} → dump ({SRC['recover-fail']})")
    return Decision(
        "exit", f"{why} → exit, dump not usable {_why_none(inputs, state)} ({SRC['recover-fail']})"
    )


def _choose_for_restart_fail(inputs: EngineInput, state: _State, why: str, src: str) -> Decision:
    """chooseForRestartProcessFail (controller.go:1108-1119): recover → scale-in → dump → exit."""
    if _support_recover_kind(inputs, state, "recover"):
        return Decision("recover", f"{why}: recover is usable ({src})")
    if can_scale_in(inputs, state)[0]:
        return Decision("elastic-training", f"{why}: scale-in (downgrade) is usable ({SRC['scale-in']})")
    if support_dump(inputs, state):
        return Decision("dump", f"{why}: dump is usable ({src})")
    return Decision("exit", f"{why}: no usable process strategy {_why_none(inputs, state)} ({src})")


def first_choice(inputs: EngineInput, state: _State | None = None) -> Decision:
    """firstChooseStrategy + chooseStrategy's retry check (controller.go:1096-1106, 1164-1183)."""
    state = state or _State(agent=set(inputs.agent))
    if dump_for_fault(inputs):
        return Decision(
            "dump",
            f"DumpForFault: dump is the only process strategy and the job is {inputs.health} "
            f"({SRC['dump-for-fault']})",
        )
    if support_retry(inputs) and _only_retry_faults(inputs.faults):
        if "retry" not in state.agent:
            return _choose_for_recover_fail(
                inputs,
                state,
                f"retry is first but the agent does not report retry ({SRC['retry-unsupported']})",
            )
        return Decision("retry", f"retry is configured and every fault is UCE/HCCL ({SRC['first']})")
    if _support_in_place(inputs, state, in_place_condition(inputs.faults, inputs.release)):
        as_pods = in_place_pods(inputs.faults, inputs.release)[1]
        why = (
            f"pod(s) {list(as_pods)} restart as pods, the others in place ({SRC['in-place-pods']})"
            if as_pods
            else "every faulty pod has only business-process or RestartRequest/RestartBusiness faults"
        )
        return Decision("recover-in-place", f"{why} ({SRC['first']}, {SRC['in-place-soft']})")
    return _choose_for_restart_fail(inputs, state, "first choice", SRC["restart-fail"])


def after_failure(
    inputs: EngineInput, failed: str, state: _State | None = None, restart_fault_process: bool = True
) -> Decision:
    """chooseStrategy after a failed attempt (controller.go:1184-1192)."""
    state = state or _State(agent=set(inputs.agent))
    if failed == "retry":
        why = "retry failed"
        if _support_in_place(
            inputs, state, restart_fault_process and in_place_condition(inputs.faults, inputs.release)
        ):
            return Decision("recover-in-place", f"{why}: recover-in-place is usable ({SRC['retry-fail']})")
        return _choose_for_restart_fail(inputs, state, why, SRC["retry-fail"])
    if failed in ("recover", "recover-in-place", "elastic-training", SCALE_OUT):
        return _choose_for_recover_fail(inputs, state, f"{failed} failed")
    return Decision("exit", f"{failed} failed → exit ({SRC['result']})")


def dump_for_fault(inputs: EngineInput) -> bool:
    """shouldDumpWhenOccurFault (controller.go:430-470): dump is the only choice and the job is
    UnHealthy (or SubHealthy with graceExit); the agent is not asked."""
    policy = inputs.policy
    if not policy.process_recovery_on:
        return False
    if policy.platform_mode:
        if inputs.standing_answer != "dump" or "dump" not in policy.configured:
            return False
    elif not policy.configured or policy.configured[0] != "dump":
        return False
    health = inputs.health
    if health == vocab.UNHEALTHY:
        return True
    return health == vocab.SUB_HEALTHY and policy.sub_healthy_strategy == "graceExit"


def usable_strategies(inputs: EngineInput) -> tuple[str, ...]:
    """The process strategies ClusterD could pick for these inputs, in priority order (for display)."""
    state = _State(agent=set(inputs.agent))
    found = []
    if support_retry(inputs) and "retry" in state.agent:
        found.append("retry")
    if _support_recover_kind(inputs, state, "recover-in-place"):
        found.append("recover-in-place")
    if _support_recover_kind(inputs, state, "recover"):
        found.append("recover")
    if can_scale_in(inputs, state)[0]:
        found.append("elastic-training")
    if support_dump(inputs, state):
        found.append("dump")
    return tuple(found)


def _live_in_place(inputs: EngineInput) -> bool:
    """JudgeRestartProcessByJobKey on the live PodGroup (pg_util.go:94-118); unknown = as snapshot."""
    if inputs.live_in_place is not None:
        return inputs.live_in_place
    return inputs.policy.process_recovery_on and "recover-in-place" in inputs.policy.configured


def global_fault_restart_fault_process(inputs: EngineInput, *, reflush: bool = False) -> bool | None:
    """``RestartFaultProcess`` of the fault list ClusterD writes to reset.json at globalFault, or None
    when it writes no list there (or never reaches globalFault).

    handleNotifyGlobalFault (controller.go:1001-1031): retry-type faults take notifyFaultForRetryFaultCase,
    which writes no list (controller.go:870-886; in platform mode it writes one only when the platform's
    result adds non-retry faults, controller.go:888-924, not modelled). Otherwise updateRestartFaultProcess
    (controller.go:2138-2152) makes ``restartFaultProcess`` true when a fault pod can restart in place, and
    false when only software faults hit more than one pod; pods enter that list only while the live
    PodGroup has the label ``on`` and ``recover-in-place`` (JudgeRestartProcessByJobKey,
    controller.go:2102-2121, pg_util.go:94-118). notifyFaultForNormalFaultCase then writes the list with
    that value (controller.go:960-966, v26.0.0+). v7.2.RC1-v7.3.x write the list only when the value is
    false (v7.3.0 controller.go:994-1013): true writes none. ``reflush``: the globalFault after a retry
    failed with 405, whose faults now go the normal way (takeRetryFault2NormalFault, controller.go:840-861).
    Which hardware levels can restart in place is ``in_place_pods``'s inference."""
    policy = inputs.policy
    if not policy.init_accepted:
        return None
    admission = admit(inputs)
    if admission.kind in ("ignore", "hot-switch"):
        return None
    inputs = admission.inputs
    if not inputs.scaled_in:
        standing_missing = (
            inputs.platform_standing is not None and inputs.platform_standing not in PLATFORM_STANDING_ANSWERS
        )
        if policy.platform_mode and (inputs.platform_timed_out or standing_missing):
            return None  # 508: FaultRetry, no globalFault
        if dump_for_fault(inputs):
            return None  # saveAndExit writes its list with false, but there is no globalFault
    if inputs.stop_report in (NO_REPORT, CODE_PROCESS_NOT_READY):
        return None  # the machine never reaches globalFault (rules.go:172-175)
    faults = inputs.scaled_in + inputs.faults
    retry_standing = "retry" in policy.configured and (
        not policy.platform_mode or inputs.standing_answer == "retry"
    )
    if not reflush and not inputs.scaled_in and retry_standing and _only_retry_faults(faults):
        return None
    value = _live_in_place(inputs) and in_place_condition(faults, inputs.release)
    release = inputs.release if inputs.release in RELEASES else DEFAULT_RELEASE
    if value and not release_at_least(release, PER_POD_IN_PLACE_RELEASE):
        return None
    return value


def ends_scaled_in(steps: list[Step]) -> bool:
    """The event ended with the job running scaled in and no scale-out: ClusterD stays in
    ScaleInRunningState (controller.go:1973-1996), so the next fault is handled as ``scaled_in``."""
    return bool(steps) and steps[-1].kind == StepKind.DONE and steps[-1].strategy == "elastic-training"


def _attempt_step(inputs: EngineInput, strategy: str, attempt: int) -> Step:
    duration = PHASE_SECONDS[strategy]
    if strategy == "retry" and any(f.fault_type == FAULT_HCCL for f in inputs.faults):
        duration += PHASE_SECONDS["hccl-route-convergence"]  # wait for HCCL route convergence first
    wire = CHANGE_STRATEGY_SIGNAL[strategy]
    actions: tuple[str, ...] = (ACTION_CHANGE_STRATEGY,)
    extra = ""
    if strategy == "recover-in-place":
        actions = (ACTION_CHANGE_STRATEGY, ACTION_FAULT_NODES_RESTART)
        extra = IN_PLACE_EXTRA_PARAMS
    elif strategy == "elastic-training":
        extra = SCALE_IN_EXTRA_PARAMS
    elif strategy == SCALE_OUT:
        extra = SCALE_OUT_EXTRA_PARAMS
    return Step(
        StepKind.ATTEMPT,
        strategy,
        f"attempt {attempt}: changeStrategy {wire}" + (f" ({extra})" if extra else ""),
        signal="changeStrategy",
        change_strategy=wire,
        pod_ranks=inputs.faulty_pod_ranks if strategy in ("recover", "recover-in-place") else (),
        duration_s=duration,
        extra_params=extra,
        actions=actions,
    )


def _result_code(result: bool | int, strategy: str) -> int:
    if result is True:
        return CODE_OK
    if result is False:
        return DEFAULT_FAILURE_CODE.get(strategy, DEFAULT_OTHER_FAILURE_CODE)
    return int(result)


def outer_rescheduling(inputs: EngineInput, why: str, *, fault_retry: bool = False) -> list[Step]:
    """What follows exit / dump: Volcano's Pod- or Job-level rescheduling, which ClusterD waits for
    (controller.go:1809-1827). Only fault-retry (controller.go:1534-1568) pauses the label around it;
    when nothing restarts the job it finds no running job within 135 s and sends killMaster, the
    label left at ``pause`` (rules.go:264-271)."""
    policy = inputs.policy
    pause = fault_retry and policy.process_recovery_on
    steps: list[Step] = []
    nothing_restarts: str | None = None
    if not (policy.pod_rescheduling or policy.job_rescheduling):
        nothing_restarts = (
            "neither fault-scheduling nor pod-rescheduling is configured, so nothing restarts the job"
        )
    elif inputs.restart_budget is not None and inputs.restart_budget <= 0:
        nothing_restarts = "the restart budget (backoffLimit / fault-retry-times) is exhausted"
    if pause:
        steps.append(
            Step(
                StepKind.PAUSE,
                reason="fault-retry: process recovery paused while Volcano reschedules "
                f"({SRC['fault-retry']})",
                label_changes={k.LABEL_PROCESS_RECOVER_ENABLE: LABEL_PAUSE},
            )
        )
        steps.append(
            Step(
                StepKind.DUMP_EXIT,
                "exit",
                f"fault-retry: changeStrategy exit with extraParams {DUMP_EXIT} ({SRC['dump-exit']})",
                signal="changeStrategy",
                change_strategy="exit",
                extra_params=DUMP_EXIT,
                actions=(ACTION_CHANGE_STRATEGY,),
            )
        )
    if nothing_restarts is not None:
        if pause:
            steps.append(
                Step(
                    StepKind.KILL_MASTER,
                    reason=f"fault-retry: the job did not run again within {int(FAULT_RETRY_WAIT_S)} s; "
                    f"killMaster, label left at pause ({SRC['kill-master']})",
                    signal="killMaster",
                    duration_s=FAULT_RETRY_WAIT_S,
                )
            )
        steps.append(Step(StepKind.JOB_FAILED, reason=f"{why}; {nothing_restarts}"))
        return steps
    if policy.pod_rescheduling and not inputs.rank0_faulty:
        steps.append(
            Step(
                StepKind.POD_RESCHEDULE,
                reason=f"{why}; pod-rescheduling=on: only the faulty pods are rescheduled",
                budget_change=-1,
                pod_ranks=inputs.faulty_pod_ranks,
                duration_s=PHASE_SECONDS["pod-reschedule"],
            )
        )
    else:
        because = (
            "the rank-0 pod failed, which always means Job-level"
            if policy.pod_rescheduling
            else f"fault-scheduling is set ({PSEUDO_JOB_RESCHEDULING})"
        )
        steps.append(
            Step(
                StepKind.JOB_RESCHEDULE,
                reason=f"{why}; {because}",
                budget_change=-1,
                duration_s=PHASE_SECONDS["job-reschedule"],
            )
        )
    if pause:
        steps.append(
            Step(
                StepKind.RESUME,
                reason=f"fault-retry: the job runs again, label back to on ({SRC['fault-retry']})",
                label_changes={k.LABEL_PROCESS_RECOVER_ENABLE: LABEL_ON},
            )
        )
    steps.append(Step(StepKind.DONE, reason="training restarted by rescheduling"))
    return steps


Outcome = Callable[[str, int], "bool | int"]


def plan(inputs: EngineInput, outcome: Outcome) -> list[Step]:
    """Every step ClusterD takes for one fault event.

    ``outcome(strategy, attempt)`` is what the agent reports for attempt number ``attempt`` (1-based,
    counted over the whole event) of ``strategy``: True / 0 = success, False = failure with the
    default code, an int = that ReportRecoverStatus code, ``NO_REPORT`` = no report at all (ClusterD
    gives up after 15 minutes, D15). It is called once per attempt, in order.
    """
    policy = inputs.policy
    if not policy.init_accepted:
        # Init returned 403: no EventController for the job, only Volcano acts on the fault.
        why = (
            "process-level recovery is off (PodGroup label process-recover-enable="
            f"{policy.process_recover_enable or 'absent'} at Init, code "
            f"{CODE_PROCESS_RECOVER_ENABLE_OFF}; {SRC['init-off']})"
        )
        return outer_rescheduling(inputs, why)
    admission = admit(inputs)
    inputs = admission.inputs
    if admission.kind == "ignore":
        return [Step(StepKind.IGNORED, reason=admission.reason)]
    if admission.kind == "hot-switch":
        if inputs.scaled_in:
            # BeginHotSwitchEvent has a rule only from InitState (rules.go:94-95): "order mix", dropped
            # (controller.go:474-479).
            return [
                Step(
                    StepKind.IGNORED,
                    reason=f"hotSwitch cannot start while the job runs scaled in: BeginHotSwitchEvent "
                    f"dropped ({SRC['order-mix']})",
                )
            ]
        return hot_switch(inputs, outcome)
    if inputs.scaled_in:
        return _plan_scaled_in(inputs, admission, outcome)
    steps = _pre_exit_steps(inputs, admission)
    standing_missing = (
        inputs.platform_standing is not None and inputs.platform_standing not in PLATFORM_STANDING_ANSWERS
    )
    if policy.platform_mode and (inputs.platform_timed_out or standing_missing):
        steps.append(
            Step(
                StepKind.PLATFORM_TIMEOUT,
                reason=f"no standing retry/recover/dump in ProcessRecoverStrategy within 300 s "
                f"({SRC['platform-wait']})",
                code=WAIT_PLATFORM_STRATEGY_TIMEOUT_CODE,
            )
        )
        steps.extend(outer_rescheduling(inputs, "fault-retry after code 508", fault_retry=True))
        return steps
    state = _State(agent=set(inputs.agent))
    if dump_for_fault(inputs):
        state.agent.add("dump")  # controller.go:680: ClusterD adds dump to the agent's list itself
        return _run(inputs, state, steps, first_choice(inputs, state), outcome, save_and_exit=True)
    if (early := _before_strategy_report(inputs)) is not None:
        return [*steps, *early]
    return _run(inputs, state, steps, first_choice(inputs, state), outcome)


def _pre_exit_steps(inputs: EngineInput, admission: Admission) -> list[Step]:
    """The v26 preExitProcess step that opens a fault's flow when admission asked for it (both flows)."""
    if admission.kind != "pre-exit":
        return []
    return [
        Step(
            StepKind.PRE_EXIT,
            reason=admission.reason,
            signal="preExitProcess",
            pod_ranks=inputs.faulty_pod_ranks,
        )
    ]


def _plan_scaled_in(inputs: EngineInput, admission: Admission, outcome: Outcome) -> list[Step]:
    """A fault while the job runs scaled in (ScaleInRunningState): FaultOccurEvent goes straight to
    stopTrain (rules.go:322-323, handleNotifyStopTrain controller.go:703-714), skipping
    handleNotifyWaitFaultFlushing: no wait for the platform's standing answer (so no 508), no
    dump-for-fault check, no FaultFlushing write (controller.go:664-690). The scale-in's faults are still
    in the cache (saveCacheFault appends, controller.go:204-219; only reset empties it,
    controller.go:286-290), so they are in stopTrain, globalFault and every later signal. So is the
    scale-in's result: chooseStrategy sees latestRecoverResult's last entry, strategy ``downgrade``, and
    chooses as after a failed scale-in — dump, else exit (controller.go:1183-1188, 1153-1158); retry,
    recover-in-place, recover and a second scale-in are never chosen. The v26 preExitProcess step and the
    rest of the flow are the normal ones. Platform mode: ``platStrategy`` keeps the first event's answer
    and the ProcessConfirmFault handshake happens at globalFault as usual — inferred, not traced
    further."""
    steps = _pre_exit_steps(inputs, admission)
    inputs = replace(inputs, faults=inputs.scaled_in + inputs.faults)
    if (early := _before_strategy_report(inputs)) is not None:
        return [*steps, *early]
    if inputs.policy.platform_mode and inputs.platform_timed_out:
        # No standing-answer wait here, but globalFault's ProcessConfirmFault handshake still runs
        # (controller.go:933-947): no result, or the first event's confirm never cleared, is code 509 →
        # FaultRetry (controller.go:815-838, rules.go:184-185) — inferred, not traced further.
        steps.append(
            Step(
                StepKind.PLATFORM_TIMEOUT,
                reason="platform handshake at globalFault failed (code 509)",
                code=CODE_CONFIRM_FAULT_FAILED,
            )
        )
        steps.extend(outer_rescheduling(inputs, "fault-retry after code 509", fault_retry=True))
        return steps
    state = _State(agent=set(inputs.agent))
    decision = _choose_for_recover_fail(
        inputs,
        state,
        f"fault while running scaled in: straight to stopTrain ({SRC['scale-in-running-fault']}); "
        f"the scale-in's result is still the last one "
        f"({SRC['choose-after-result']}, {SRC['controller-reset']})",
    )
    return _run(inputs, state, steps, decision, outcome)


def _before_strategy_report(inputs: EngineInput) -> list[Step] | None:
    """The two agent reports before any strategy is chosen (D15): ReportStopComplete after stopTrain
    and ReportRecoverStrategy after globalFault. None = both arrived, the choice goes ahead.

    Silent on either → ReportTimeoutEvent after 15 min (controller.go:36), code 507, FaultClear and
    FaultRetry (rules.go:172-173, 189-190; FaultClear → FaultRetry, rules.go:259-260); nothing is
    chosen and no ProcessRecoverStatus written. A stop-complete with code 404 (ProcessNotReady) →
    NotifyKillJob: killMaster at once, no FaultClear, no label pause (controller.go:767-768,
    rules.go:174-175, controller.go:1570-1595); the master's exit then leaves the job to Volcano's
    rescheduling (inferred: ClusterD's handleKillJob ends its part there)."""
    if inputs.stop_report == CODE_PROCESS_NOT_READY:
        return [
            Step(
                StepKind.PROCESS_NOT_READY,
                reason=f"stop-complete reported code {CODE_PROCESS_NOT_READY} (ProcessNotReady): "
                f"ProcessNotReadyEvent ({SRC['stop-not-ready']}, {SRC['stop-not-ready-rules']})",
                code=CODE_PROCESS_NOT_READY,
            ),
            Step(
                StepKind.KILL_MASTER,
                reason=f"NotifyKillJob: killMaster signal, label untouched ({SRC['kill-job']})",
                signal="killMaster",
            ),
            *outer_rescheduling(inputs, "after killMaster"),
        ]
    if inputs.stop_report == NO_REPORT:
        what, wait, rule = "stop-complete", SRC["stop-wait"], SRC["stop-timeout-rules"]
    elif not inputs.strategy_reported:
        what, wait, rule = "recover-strategy", SRC["strategy-wait"], SRC["strategy-timeout-rules"]
    else:
        return None
    return [
        Step(
            StepKind.REPORT_TIMEOUT,
            reason=f"no {what} report within {int(REPORT_TIMEOUT_S // 60)} min: ReportTimeoutEvent, code "
            f"{CODE_WAIT_REPORT_TIMEOUT}, nothing chosen ({SRC['report-timeout']}, {wait}, {rule})",
            duration_s=REPORT_TIMEOUT_S,
            code=CODE_WAIT_REPORT_TIMEOUT,
        ),
        Step(StepKind.FAULT_CLEAR, reason=f"reset.json cleared ({SRC['fault-clear']})"),
        *outer_rescheduling(inputs, f"FaultRetry after the {what} report timeout", fault_retry=True),
    ]


def hot_switch(inputs: EngineInput, outcome: Outcome) -> list[Step]:
    """The hotSwitch state machine (rules.go:92-144, hot_switch_controller.go:20-275) for one SubHealthy
    fault pod: hotSwitch signal and the pod annotated for a backup pod; ≤60 s for the backup pod to run
    (here: a free node exists), else a stop-switch signal; the agent's pause result: nothing or only
    exit → the rank-0 pod is deleted (Job-level rescheduling), else the old pod is deleted and
    changeStrategy ``migration`` sent; its result 0 = success, anything else → the rank-0 pod is
    deleted. Every failure turns the snapshot's subHealthyStrategy to ignore until the PodGroup goes.
    No ProcessRecoverStatus is written on this path."""
    pod = inputs.faulty_pod_ranks[0]
    steps = [
        Step(
            StepKind.HOT_SWITCH,
            reason=f"hotSwitch signal; pod rank {pod} annotated inHotSwitchFlow=true, needOperatorOpe=create "
            f"({SRC['hot-switch-prepare']})",
            signal="hotSwitch",
            pod_ranks=(pod,),
        )
    ]
    ignore = Step(
        StepKind.SUB_HEALTH_IGNORE,
        reason=f"hotSwitch failed: subHealthyStrategy is ignore until the PodGroup is deleted "
        f"({SRC['hot-switch-clean']})",
    )
    if not inputs.spare_resources:
        steps.append(
            Step(
                StepKind.HOT_SWITCH_STOP,
                reason=f"the backup pod did not run within {int(HOT_SWITCH_NEW_POD_WAIT_S)} s: stop switch "
                f"({SRC['hot-switch-new-pod']})",
                signal="hotSwitch",
                duration_s=HOT_SWITCH_NEW_POD_WAIT_S,
            )
        )
        return [*steps, ignore]
    steps.append(
        Step(
            StepKind.HOT_SWITCH_NEW_POD,
            reason=f"backup pod running: newPodRunning signal, waiting for the pause result "
            f"({SRC['hot-switch-new-pod']}, {SRC['hot-switch-pause']})",
            signal="hotSwitch",
            pod_ranks=(pod,),
        )
    )
    stop_job = [
        Step(
            StepKind.STOP_JOB,
            reason=f"rank-0 pod annotated needVolcanoOpe=delete, label fault-type=SubHealth "
            f"({SRC['hot-switch-stop-job']})",
        ),
        Step(
            StepKind.JOB_RESCHEDULE,
            reason="Volcano deletes the rank-0 pod: Job-level rescheduling",
            budget_change=-1,
            duration_s=PHASE_SECONDS["job-reschedule"],
        ),
        ignore,
    ]
    volcano_deletes = inputs.policy.job_rescheduling
    if not volcano_deletes:
        # Only Volcano deletes a pod annotated needVolcanoOpe=delete, and it skips a job whose
        # fault-scheduling label is off or absent (reschedule.go:108-114, task.go:59-70).
        stop_job = [stop_job[0], stop_job[2]]
    if not inputs.agent:
        return [*steps, *stop_job]
    steps.append(
        Step(
            StepKind.DELETE_OLD_POD,
            reason=f"pause result names more than exit: old pod annotated needVolcanoOpe=delete "
            f"({SRC['hot-switch-pause']}, {SRC['hot-switch-delete-old']})",
            pod_ranks=(pod,),
        )
    )
    if not volcano_deletes:
        steps.append(
            Step(
                StepKind.HOT_SWITCH_STUCK,
                reason=f"fault-scheduling is off: Volcano never deletes the old pod ({SRC['volcano-off']}, "
                f"{SRC['volcano-hot-switch-delete']}), and ClusterD waits for OldPodDeletedEvent without a "
                f"timeout ({SRC['wait-old-pod-deleted']}): the switch never finishes, no migration",
                pod_ranks=(pod,),
            )
        )
        return steps
    steps.append(
        Step(StepKind.CHOOSE, CHANGE_STRATEGY_MIGRATION, f"old pod deleted ({SRC['hot-switch-migration']})")
    )
    steps.append(
        Step(
            StepKind.ATTEMPT,
            CHANGE_STRATEGY_MIGRATION,
            "attempt 1: changeStrategy migration",
            signal="changeStrategy",
            change_strategy=CHANGE_STRATEGY_MIGRATION,
            pod_ranks=(pod,),
            duration_s=PHASE_SECONDS["hot-switch"],
            actions=(ACTION_CHANGE_STRATEGY,),
        )
    )
    result = outcome(CHANGE_STRATEGY_MIGRATION, 1)
    code = CODE_OK if result is True else CODE_UNRECOVERABLE_RETRY_ERROR if result is False else int(result)
    if code == CODE_OK:
        steps.append(
            Step(
                StepKind.SUCCEEDED,
                CHANGE_STRATEGY_MIGRATION,
                f"migration succeeded; no ProcessRecoverStatus ({SRC['hot-switch-result']})",
            )
        )
        steps.append(Step(StepKind.DONE, CHANGE_STRATEGY_MIGRATION, "training continues on the backup pod"))
        return steps
    steps.append(
        Step(
            StepKind.FAILED,
            CHANGE_STRATEGY_MIGRATION,
            f"migration failed with code {code} ({SRC['hot-switch-result']})",
            code=code,
        )
    )
    return [*steps, *stop_job]


def _run(
    inputs: EngineInput,
    state: _State,
    steps: list[Step],
    decision: Decision,
    outcome: Outcome,
    *,
    save_and_exit: bool = False,
) -> list[Step]:
    attempt = 0
    restart_fault_process = True
    while decision.strategy != "exit":
        strategy = decision.strategy
        if strategy in state.tried:  # defensive: the fallback order never repeats
            decision = Decision("exit", f"{strategy} was already tried → exit")
            break
        if (
            strategy == "recover"
            and inputs.policy.platform_mode
            and not inputs.rank_table_ready
            and "recover" not in state.tried
        ):
            steps.append(Step(StepKind.CHOOSE, strategy, decision.reason))
            steps.append(
                Step(
                    StepKind.RANK_TABLE_NOT_READY,
                    strategy,
                    f"RankTableReady is not exactly 'true' ({SRC['rank-table']})",
                )
            )
            state.tried.append(strategy)
            decision = _choose_for_recover_fail(inputs, state, "RankTableReady not ready")
            continue
        state.tried.append(strategy)
        attempt += 1
        steps.append(Step(StepKind.CHOOSE, strategy, decision.reason))
        if strategy == "dump" and save_and_exit:
            steps.append(
                Step(
                    StepKind.ATTEMPT,
                    "dump",
                    f"attempt {attempt}: saveAndExit ({SRC['dump-for-fault']})",
                    signal="saveAndExit",
                    change_strategy="",
                    duration_s=PHASE_SECONDS["dump"],
                    actions=("save_and_exit",),
                )
            )
        else:
            as_pods = (
                in_place_pods(inputs.faults, inputs.release)[1] if strategy == "recover-in-place" else ()
            )
            if as_pods:
                # v26: the pods whose faults did not clear exit as pods (globalFault's NodeRankIds) and
                # are recreated; the other fault pods restart their processes in place.
                steps.append(
                    Step(
                        StepKind.RESTART_PODS,
                        strategy,
                        f"pod(s) {list(as_pods)} still faulty after {int(IN_PLACE_FAULT_WAIT_S)} s "
                        f"restart as pods ({SRC['in-place-wait']}, {SRC['in-place-pods']})",
                        pod_ranks=as_pods,
                        duration_s=IN_PLACE_FAULT_WAIT_S,
                    )
                )
            steps.append(_attempt_step(inputs, strategy, attempt))
        if strategy == "recover" and not inputs.spare_resources:
            # listenScheduleResult: no new pod can run, so wait-reschedule-timeout passes first.
            steps.append(
                Step(
                    StepKind.RESCHEDULE_WAIT,
                    strategy,
                    f"no rescheduled pod within wait-reschedule-timeout={inputs.wait_reschedule_s} s "
                    f"({SRC['listen-reschedule']}, {SRC['reschedule-timeout']})",
                    duration_s=float(inputs.wait_reschedule_s),
                )
            )
            if "elastic-training" in inputs.policy.configured and "downgrade" in state.agent:
                decision = Decision(
                    "elastic-training",
                    f"schedule timeout and elastic-training is supported: scale-in "
                    f"({SRC['schedule-timeout']}, {SRC['scale-in-after-timeout']})",
                )
                continue
            steps.append(
                Step(
                    StepKind.FAILED,
                    strategy,
                    f"ScheduleTimeout, code {CODE_SCHEDULE_TIMEOUT}: no ProcessRecoverStatus "
                    f"({SRC['schedule-timeout']}, {SRC['schedule-timeout-rules']})",
                    code=CODE_SCHEDULE_TIMEOUT,
                )
            )
            steps.append(Step(StepKind.FAULT_CLEAR, reason=f"reset.json cleared ({SRC['fault-clear']})"))
            steps.extend(outer_rescheduling(inputs, "FaultRetry after a schedule timeout", fault_retry=True))
            return steps
        code = _result_code(outcome(strategy, attempt), strategy)
        if code == NO_REPORT:
            if strategy == "elastic-training":
                # No isolate-ranks report: back to the strategy choice (rules.go:293-294).
                steps.append(_report_timeout_step(strategy, SRC["isolate-timeout-rules"]))
                decision = after_failure(inputs, strategy, state, restart_fault_process)
                continue
            return _after_report_timeout(inputs, strategy, steps)
        if strategy == "elastic-training" and code == CODE_EXIT_ISOLATE_RANKS:
            # Scale-in result 201: faultNodesExit to the nodes of IsolateRankIds, then ClusterD waits
            # for the scale-in result proper (controller.go:1468-1493, rules.go:296-306).
            steps.append(
                Step(
                    StepKind.FAULT_NODES_EXIT,
                    strategy,
                    f"scale-in result {CODE_EXIT_ISOLATE_RANKS}: faultNodesExit to the isolated ranks' nodes "
                    f"({SRC['isolate-ranks']}, {SRC['isolate-rules']})",
                    signal="faultNodesExit",
                    code=CODE_EXIT_ISOLATE_RANKS,
                    actions=("fault_nodes_exit",),
                )
            )
            attempt += 1
            code = _result_code(outcome(strategy, attempt), strategy)
            if code == NO_REPORT:
                return _after_report_timeout(inputs, strategy, steps)
        status = _STATUS_NAME[strategy]
        if code == CODE_OK:
            steps.append(
                Step(
                    StepKind.SUCCEEDED,
                    strategy,
                    f"ReportRecoverStatus: {strategy} succeeded ({SRC['result']})",
                    recover_status=f"{status}-success" if status else None,
                )
            )
            if strategy == "elastic-training":
                # ScaleInSuccessEvent → ScaleInRunning: waitScaleOut polls every 5 s, without limit,
                # for the PodGroup running with changed fault pods (controller.go:1973-1996).
                if not inputs.scale_out:
                    steps.append(
                        Step(
                            StepKind.DONE,
                            strategy,
                            "training continues scaled in; ClusterD polls every "
                            f"{int(SCALE_OUT_POLL_S)} s, unbounded, for the fault pods' replacements "
                            f"({SRC['scale-in-running']}, {SRC['wait-scale-out']})",
                        )
                    )
                    return steps
                steps.append(
                    Step(
                        StepKind.SCALE_OUT_WAIT,
                        SCALE_OUT,
                        "the fault pods' replacements run and the PodGroup is Running "
                        f"({SRC['wait-scale-out']})",
                        pod_ranks=inputs.faulty_pod_ranks,
                        duration_s=SCALE_OUT_POLL_S,
                    )
                )
                decision = Decision(
                    SCALE_OUT,
                    f"waitScaleOut, not chooseStrategy: changeStrategy {SCALE_OUT} "
                    f"{SCALE_OUT_EXTRA_PARAMS}, 15 min for its result ({SRC['wait-scale-out']}, "
                    f"{SRC['scale-out-report']}, {SRC['scale-out-rules']})",
                )
                continue
            if strategy != "dump":
                steps.append(Step(StepKind.DONE, strategy, "training continues"))
                return steps
            return _after_dump(inputs, steps)
        removed: tuple[str, ...] = ()
        if strategy == "retry" and code != CODE_RECOVERABLE_RETRY_ERROR:
            removed = ("recover", "dump") if code == CODE_CLIENT_ERROR else ("recover",)
            state.agent.difference_update(removed)
        steps.append(
            Step(
                StepKind.FAILED,
                strategy,
                f"ReportRecoverStatus: {strategy} failed with code {code}"
                + (f"; ClusterD drops {', '.join(removed)} from the agent's list" if removed else "")
                + f" ({SRC['retry-codes'] if strategy == 'retry' else SRC['result']})",
                recover_status=f"{status}-failed" if status else None,
                code=code,
                removed=removed,
            )
        )
        if strategy == "dump":
            return _after_dump(inputs, steps)
        if strategy == "retry":
            if code == CODE_RECOVERABLE_RETRY_ERROR:
                steps.append(
                    Step(
                        StepKind.REFLUSH,
                        reason=f"code {code}: ClusterD flushes the faults again ({SRC['retry-codes']})",
                        code=code,
                    )
                )
            else:
                # handleKillPod goes straight back to the choice; restartFaultProcess was never set
                # for a retry-type fault, so recover-in-place is out (controller.go:1006-1011, 1024).
                restart_fault_process = False
        decision = after_failure(inputs, strategy, state, restart_fault_process)
    steps.append(Step(StepKind.CHOOSE, "exit", decision.reason))
    steps.append(
        Step(
            StepKind.EXIT,
            "exit",
            f"stop training; handleDecideExitStrategy writes no ProcessRecoverStatus ({SRC['exit-decided']})",
            signal="changeStrategy",
            change_strategy="exit",
            duration_s=PHASE_SECONDS["exit"],
            actions=(ACTION_CHANGE_STRATEGY,),
        )
    )
    steps.extend(after_result(inputs, "after exit"))
    return steps


def _report_timeout_step(strategy: str, rule: str) -> Step:
    wait = (
        SRC["retry-report-wait"]
        if strategy == "retry"
        else (
            SRC["recover-report-wait"] if strategy in ("recover", "recover-in-place") else SRC["report-wait"]
        )
    )
    return Step(
        StepKind.REPORT_TIMEOUT,
        strategy,
        f"no {strategy} result reported within {int(REPORT_TIMEOUT_S // 60)} min: ReportTimeoutEvent, "
        f"code {CODE_WAIT_REPORT_TIMEOUT}, no ProcessRecoverStatus ({SRC['report-timeout']}, {wait}, {rule})",
        duration_s=REPORT_TIMEOUT_S,
        code=CODE_WAIT_REPORT_TIMEOUT,
    )


def _after_report_timeout(inputs: EngineInput, strategy: str, steps: list[Step]) -> list[Step]:
    """The agent never reported the attempt's result (D15). A retry result's timeout goes straight to
    FaultRetry (rules.go:211-212); a recover, in-place, dump or scale-in result's to FaultClear, then
    FaultRetry (rules.go:218-219, 225-226, 305-306; FaultClear → FaultRetry, rules.go:259-260)."""
    if strategy == "retry":
        steps.append(_report_timeout_step(strategy, SRC["retry-timeout-rules"]))
        steps.extend(outer_rescheduling(inputs, "FaultRetry after a report timeout", fault_retry=True))
        return steps
    rule = {
        "dump": SRC["dump-timeout-rules"],
        "elastic-training": SRC["scale-in-timeout-rules"],
        SCALE_OUT: SRC["scale-out-timeout-rules"],
    }.get(strategy, SRC["recover-timeout-rules"])
    steps.append(_report_timeout_step(strategy, rule))
    steps.append(Step(StepKind.FAULT_CLEAR, reason=f"reset.json cleared ({SRC['fault-clear']})"))
    steps.extend(outer_rescheduling(inputs, "FaultRetry after a report timeout", fault_retry=True))
    return steps


def _after_dump(inputs: EngineInput, steps: list[Step]) -> list[Step]:
    """After a dump (saved or not) ClusterD sends the dump-exit signal and waits for rescheduling;
    it writes no exit-completed (controller.go:1446-1458)."""
    steps.append(
        Step(
            StepKind.DUMP_EXIT,
            "exit",
            f"changeStrategy exit with extraParams {DUMP_EXIT} ({SRC['dump-exit']})",
            signal="changeStrategy",
            change_strategy="exit",
            extra_params=DUMP_EXIT,
            duration_s=PHASE_SECONDS["exit"],
            actions=(ACTION_CHANGE_STRATEGY,),
        )
    )
    steps.extend(after_result(inputs, "after dump"))
    return steps


# ListenScheduleResult outside platform mode: CheckPodReschedulingTimes x SleepSecondBeforeCheckPGRunning
# (const.go:138-141); FaultRetry waits CheckPGRunningRetryTimes/2 x 5 s = 135 s (const.go:136-137).
LISTEN_SCHEDULE_S: Final = 4 * 5.0
FAULT_RETRY_WAIT_S: Final = 27 * 5.0


def after_result(inputs: EngineInput, why: str) -> list[Step]:
    """What ClusterD does after a chosen exit or a dump result (rules.go:236-275, source facts D2).

    Platform mode: ListenScheduleResult succeeds at once (controller.go:1810-1813), so reset.json gets
    ``restartAllProcess`` (RetryTime+1, controller.go:1829-1838), the 60 s wait is skipped
    (controller.go:1867-1870), FaultClear empties reset.json (controller.go:692-701) and FaultRetry
    pauses the label, sends dump-exit and waits ≤135 s for the job (controller.go:1534-1568).
    Otherwise ClusterD first waits ≤4x5 s for the job running with its fault pods rescheduled
    (controller.go:1814-1826); Volcano's rescheduling takes longer than that here (``PHASE_SECONDS``),
    so it is ScheduleTimeout → FaultClear → FaultRetry (rules.go:246-247, 259-260).
    """
    steps: list[Step] = []
    if inputs.policy.platform_mode:
        steps.append(
            Step(
                StepKind.RESTART_ALL_PROCESS,
                reason=f"{why}: platform mode skips the schedule wait; reset.json restartAllProcess "
                f"({SRC['schedule']}, {SRC['restart-all']}; no 60 s wait, {SRC['restart-wait']})",
            )
        )
    else:
        steps.append(
            Step(
                StepKind.LISTEN_SCHEDULE,
                reason=f"{why}: ≤4x5 s for the job running with its fault pods rescheduled "
                f"({SRC['schedule']})",
                duration_s=LISTEN_SCHEDULE_S,
            )
        )
    steps.append(Step(StepKind.FAULT_CLEAR, reason=f"reset.json cleared ({SRC['fault-clear']})"))
    steps.extend(outer_rescheduling(inputs, why, fault_retry=True))
    return steps


def chosen_strategies(steps: list[Step]) -> list[str]:
    """The strategies in the order they were chosen (handy for tables and tests)."""
    return [s.strategy for s in steps if s.kind == StepKind.CHOOSE and s.strategy]


def recover_statuses(steps: list[Step]) -> list[str]:
    """The ProcessRecoverStatus values ClusterD writes, in order."""
    return [s.recover_status for s in steps if s.recover_status]

"""ClusterD's recovery-strategy choice as a pure, deterministic function (mindcluster.md §3.2, §7).

No I/O, no clock, no randomness: given what ClusterD knows about a job at fault time (the PodGroup's
labels and annotations, the strategies TaskD reported, the faults, the platform's answer) and an
oracle that says whether each recovery attempt works, ``plan`` returns the ordered list of ``Step``s
ClusterD takes. The simulated ClusterD controller executes those steps against the cluster; a
"what-if" simulator can call the same API and just print them.

Typical use::

    policy = RecoveryPolicy.from_podgroup(labels, annotations)
    inputs = EngineInput(policy=policy, supported=frozenset({"retry", "recover", "exit"}),
                         faults=(RankFault(rank=8, pod_rank=1, node="node-2", fault_type=FAULT_UCE),))
    steps = plan(inputs, outcome=lambda strategy, attempt: True)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from apps.cluster import constants as k
from apps.policies.spec import STRATEGY_PRIORITY

# --- fault vocabulary -----------------------------------------------------------------------------
# FaultRank.faultType values on the wire (clusterd-wire.md).
FAULT_UCE: Final = "0"
FAULT_OTHER: Final = "1"
FAULT_HCCL: Final = "2"
RETRY_FAULT_TYPES: Final = frozenset({FAULT_UCE, FAULT_HCCL})

# Chip handling levels for which recover-in-place restarts only the processes (§3.1).
IN_PLACE_LEVELS: Final = frozenset({"RestartRequest", "RestartBusiness"})
# Levels after which the faulty chip/node cannot keep training: the job is UnHealthy.
UNHEALTHY_LEVELS: Final = frozenset(
    {
        "FreeRestartNPU",
        "RestartNPU",
        "PreSeparateNPU",
        "SeparateNPU",
        "ManuallySeparateNPU",
        "PreSeparateFault",
        "SeparateFault",
    }
)
SUB_HEALTHY_LEVELS: Final = frozenset({"SubHealthFault"})

# --- strategies -----------------------------------------------------------------------------------
PSEUDO_POD_RESCHEDULING: Final = "pod-rescheduling"
PSEUDO_JOB_RESCHEDULING: Final = "job-rescheduling"
# The pseudo-strategies have no documented priority; they sort after every process strategy.
_PRIORITY: Final = {**STRATEGY_PRIORITY, PSEUDO_POD_RESCHEDULING: 7, PSEUDO_JOB_RESCHEDULING: 8}
PROCESS_STRATEGIES: Final = ("retry", "recover-in-place", "recover", "elastic-training", "dump")
# What ProcessRecoverStatus says after each outcome (§6.4). elastic-training and recover-in-place
# report under the names MindIO uses for them.
_STATUS_NAME: Final = {
    "retry": "retry",
    "recover": "recover",
    "recover-in-place": "recover",
    "elastic-training": "recover",
    "dump": "dump",
}
# ProcessManageSignal.changeStrategy values ClusterD sends for each strategy (clusterd-wire.md).
CHANGE_STRATEGY_SIGNAL: Final = {
    "retry": "retry",
    "recover": "recover",
    "recover-in-place": "recover-in-place",
    "elastic-training": "downgrade",
    "dump": "dump",
    "exit": "exit",
}

# Nominal simulated durations in seconds (§7.3: retry fastest, process-level tens of seconds,
# rescheduling one to four minutes). The controller scales them with its clock.
PHASE_SECONDS: Final = {
    "detect": 3.0,
    "retry": 8.0,
    "hccl-route-convergence": 3.0,
    "recover-in-place": 25.0,
    "recover": 45.0,
    "elastic-training": 30.0,
    "dump": 20.0,
    "exit": 5.0,
    "pod-reschedule": 70.0,
    "job-reschedule": 150.0,
}

WAIT_PLATFORM_STRATEGY_TIMEOUT_CODE: Final = 508
LABEL_ON: Final = "on"
LABEL_PAUSE: Final = "pause"


class StepKind:
    """What a ``Step`` does. Plain strings so steps serialise and compare easily."""

    PLATFORM_TIMEOUT = "platform-timeout"  # no usable ProcessRecoverStrategy within 300 s → code 508
    CHOOSE = "choose"  # a strategy was chosen (first choice or fallback)
    ATTEMPT = "attempt"  # changeStrategy / saveAndExit signal sent, waiting for ReportRecoverStatus
    SUCCEEDED = "succeeded"  # the attempt worked; ProcessRecoverStatus <name>-success
    FAILED = "failed"  # the attempt failed; ProcessRecoverStatus <name>-failed
    EXIT = "exit"  # training processes stopped; ProcessRecoverStatus exit-completed
    PAUSE = "pause"  # PodGroup label process-recover-enable=pause
    POD_RESCHEDULE = "pod-reschedule"  # Pod-level rescheduling of the faulty pods
    JOB_RESCHEDULE = "job-reschedule"  # Job-level rescheduling: every pod recreated
    RESUME = "resume"  # PodGroup label process-recover-enable=on again
    JOB_FAILED = "job-failed"  # nothing left to restart the job with
    DONE = "done"  # training runs again


# --- inputs ---------------------------------------------------------------------------------------
def parse_recover_strategy(annotation: str | None, labels: Mapping[str, str]) -> tuple[str, ...]:
    """Parse ``recover-strategy`` plus the rescheduling labels exactly like ClusterD (utils.go).

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
    """``Healthy`` / ``SubHealthy`` / ``UnHealthy`` from the faults' handling levels."""
    if any(f.node_fault or f.level in UNHEALTHY_LEVELS for f in faults):
        return "UnHealthy"
    if any(f.level in SUB_HEALTHY_LEVELS for f in faults):
        return "SubHealthy"
    return "Healthy"


@dataclass(frozen=True)
class RecoveryPolicy:
    """What ClusterD reads from a job's PodGroup."""

    configured: tuple[str, ...] = ("exit",)  # parse_recover_strategy output
    process_recover_enable: str = ""  # PodGroup label: on / pause / off / ""
    platform_mode: bool = False  # ProcessRecoverStrategy annotation present
    sub_healthy_strategy: str = "ignore"

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
        """ClusterD runs its per-job recovery state machine only with the label ``on``."""
        return self.process_recover_enable == LABEL_ON


@dataclass(frozen=True)
class EngineInput:
    """Everything the choice depends on, frozen at fault time."""

    policy: RecoveryPolicy
    supported: frozenset[str]  # what TaskD/MindIO reported in ReportRecoverStrategy
    faults: tuple[RankFault, ...]
    platform_choice: str | None = None  # ProcessRecoverStrategy value (platform mode only)
    platform_timed_out: bool = False  # no answer within 300 s (code 508)
    spare_resources: bool = True  # a free node exists for migration / rescheduling
    restart_budget: int | None = None  # Job/Pod reschedules left; None = unlimited

    @property
    def rank0_faulty(self) -> bool:
        return any(f.pod_rank == 0 for f in self.faults)

    @property
    def faulty_pod_ranks(self) -> tuple[int, ...]:
        return tuple(sorted({f.pod_rank for f in self.faults}))

    @property
    def health(self) -> str:
        return job_health(self.faults)


@dataclass(frozen=True)
class Decision:
    """A chosen strategy and the rule that chose it."""

    strategy: str
    reason: str


@dataclass(frozen=True)
class Step:
    """One thing ClusterD does. ``reason`` cites the rule (mindcluster.md section) behind it."""

    kind: str
    strategy: str | None = None
    reason: str = ""
    label_changes: Mapping[str, str] = field(default_factory=dict)  # PodGroup labels to set
    budget_change: int = 0  # change of the Job/Pod restart budget
    recover_status: str | None = None  # PodGroup ProcessRecoverStatus to write
    signal: str | None = None  # ProcessManageSignal.signalType sent to TaskD
    change_strategy: str | None = None  # ProcessManageSignal.changeStrategy
    pod_ranks: tuple[int, ...] = ()  # pods affected (migration / rescheduling)
    duration_s: float = 0.0  # nominal simulated duration of the step
    code: int = 0  # ClusterD return code, when the step is an error


# --- the rules ------------------------------------------------------------------------------------
def _matches_platform(strategy: str, choice: str | None) -> bool:
    if choice is None:
        return False
    # ProcessRecoverStrategy only knows retry/recover/dump (§6.4, §10.9): in-place is tied to recover.
    return strategy == choice or (strategy == "recover-in-place" and choice == "recover")


def usable(inputs: EngineInput, strategy: str) -> bool:
    """Configured AND supported by TaskD AND (platform mode) the platform's choice (§3.2)."""
    if strategy not in inputs.policy.configured or strategy not in inputs.supported:
        return False
    if inputs.policy.platform_mode:
        return _matches_platform(strategy, inputs.platform_choice)
    return True


def usable_strategies(inputs: EngineInput) -> tuple[str, ...]:
    """The usable process strategies in priority order."""
    return tuple(s for s in PROCESS_STRATEGIES if usable(inputs, s))


def _only_retry_faults(faults: tuple[RankFault, ...]) -> bool:
    return bool(faults) and all(f.fault_type in RETRY_FAULT_TYPES and not f.node_fault for f in faults)


def _in_place_condition(faults: tuple[RankFault, ...]) -> bool:
    """Every faulty node has only business-process faults or RestartRequest/RestartBusiness ones."""
    return bool(faults) and all(f.business_process or f.level in IN_PLACE_LEVELS for f in faults)


def _elastic_allowed(inputs: EngineInput) -> tuple[bool, str]:
    if inputs.rank0_faulty:
        return False, "the rank-0 pod is faulty"
    if (inputs.policy.job_rescheduling or inputs.policy.pod_rescheduling) and inputs.spare_resources:
        return False, "Job/Pod rescheduling is configured and spare resources exist"
    return True, ""


def _dump_for_fault_event(inputs: EngineInput) -> bool:
    """dump is the only usable process strategy and the job is UnHealthy (§3.2 special case)."""
    if usable_strategies(inputs) != ("dump",):
        return False
    health = inputs.health
    grace_exit = inputs.policy.sub_healthy_strategy == "graceExit"
    return health == "UnHealthy" or (health == "SubHealthy" and grace_exit)


def first_choice(inputs: EngineInput) -> Decision:
    """``firstChooseStrategy`` (§3.2): the strategy ClusterD tries first for these faults."""
    if _dump_for_fault_event(inputs):
        return Decision(
            "dump",
            f"§3.2 DumpForFaultEvent: dump is the only process strategy and the job is "
            f"{inputs.health}, so ClusterD goes straight to dump",
        )
    if usable(inputs, "retry") and _only_retry_faults(inputs.faults):
        return Decision("retry", "§3.2 rule 1: retry is usable and every fault is retry-type (UCE/HCCL)")
    if usable(inputs, "recover-in-place") and _in_place_condition(inputs.faults):
        return Decision(
            "recover-in-place",
            "§3.2 rule 2: every faulty node has only business-process or "
            "RestartRequest/RestartBusiness faults",
        )
    if usable(inputs, "recover"):
        return Decision("recover", "§3.2 rule 3: recover is usable")
    if usable(inputs, "elastic-training") and _elastic_allowed(inputs)[0]:
        return Decision("elastic-training", "§3.2 rule 4: scale-in (elastic-training) is usable")
    if usable(inputs, "dump"):
        return Decision("dump", "§3.2 rule 5: dump is usable")
    return Decision("exit", "§3.2 rule 6: no usable process strategy " + _why_none(inputs))


def _why_none(inputs: EngineInput) -> str:
    parts = [f"configured={list(inputs.policy.process_strategies)}", f"supported={sorted(inputs.supported)}"]
    if inputs.policy.platform_mode:
        parts.append(f"platform={inputs.platform_choice!r}")
    return "(" + ", ".join(parts) + ")"


def after_failure(inputs: EngineInput, failed: str) -> Decision:
    """The fallback after ``failed`` did not work (§3.2 "Fallback after a failure")."""
    if failed == "retry":
        if usable(inputs, "recover-in-place") and _in_place_condition(inputs.faults):
            return Decision("recover-in-place", "§3.2 fallback: retry failed → recover-in-place")
        if usable(inputs, "recover"):
            return Decision("recover", "§3.2 fallback: retry failed → recover")
        if usable(inputs, "elastic-training") and _elastic_allowed(inputs)[0]:
            return Decision("elastic-training", "§3.2 fallback: retry failed → scale-in")
        if usable(inputs, "dump"):
            return Decision("dump", "§3.2 fallback: retry failed → dump")
        return Decision("exit", f"§3.2 fallback: retry failed and nothing else is usable {_why_none(inputs)}")
    if failed in ("recover", "elastic-training"):
        if usable(inputs, "dump"):
            return Decision("dump", f"§3.2 fallback: {failed} failed → dump")
        return Decision("exit", f"§3.2 fallback: {failed} failed and dump is not usable → exit")
    return Decision("exit", f"§3.2 fallback: {failed} failed → exit")


def _attempt_steps(inputs: EngineInput, strategy: str, attempt: int) -> Step:
    duration = PHASE_SECONDS[strategy]
    if strategy == "retry" and any(f.fault_type == FAULT_HCCL for f in inputs.faults):
        duration += PHASE_SECONDS["hccl-route-convergence"]  # wait for HCCL route convergence first
    signal = "saveAndExit" if strategy == "dump" else "changeStrategy"
    return Step(
        StepKind.ATTEMPT,
        strategy,
        f"attempt {attempt}: {signal} {CHANGE_STRATEGY_SIGNAL[strategy]}",
        signal=signal,
        change_strategy=CHANGE_STRATEGY_SIGNAL[strategy],
        pod_ranks=inputs.faulty_pod_ranks if strategy in ("recover", "recover-in-place") else (),
        duration_s=duration,
    )


def outer_rescheduling(inputs: EngineInput, why: str) -> list[Step]:
    """Volcano's Pod- or Job-level rescheduling after exit (§3.2 last rule, §7.2)."""
    policy = inputs.policy
    pause = policy.process_recovery_on
    steps: list[Step] = []
    if not (policy.pod_rescheduling or policy.job_rescheduling):
        steps.append(
            Step(
                StepKind.JOB_FAILED,
                reason=f"{why}; neither fault-scheduling nor pod-rescheduling "
                "is configured, so nothing restarts the job",
            )
        )
        return steps
    if inputs.restart_budget is not None and inputs.restart_budget <= 0:
        steps.append(
            Step(
                StepKind.JOB_FAILED,
                reason=f"{why}; the restart budget (backoffLimit / fault-retry-times) is exhausted",
            )
        )
        return steps
    if pause:
        steps.append(
            Step(
                StepKind.PAUSE,
                reason="§3.2: after exit ClusterD pauses process recovery so Volcano can reschedule",
                label_changes={k.LABEL_PROCESS_RECOVER_ENABLE: LABEL_PAUSE},
            )
        )
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
            "the rank-0 pod failed, which always means Job-level (§3.3)"
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
                reason="§7.1 FaultRetry: the job runs again, label back to on",
                label_changes={k.LABEL_PROCESS_RECOVER_ENABLE: LABEL_ON},
            )
        )
    steps.append(Step(StepKind.DONE, reason="training restarted by rescheduling"))
    return steps


def plan(inputs: EngineInput, outcome: Callable[[str, int], bool]) -> list[Step]:
    """Every step ClusterD takes for one fault event.

    ``outcome(strategy, attempt)`` says whether attempt number ``attempt`` (1-based, counted over the
    whole event) of ``strategy`` succeeds; it is called once per attempt, in order.
    """
    policy = inputs.policy
    if not policy.process_recovery_on or not policy.process_strategies:
        why = (
            "process-level recovery is off (PodGroup label process-recover-enable="
            f"{policy.process_recover_enable or 'absent'})"
            if not policy.process_recovery_on
            else "no process-level strategy is configured"
        )
        return outer_rescheduling(inputs, why)
    steps: list[Step] = []
    if policy.platform_mode and inputs.platform_timed_out:
        steps.append(
            Step(
                StepKind.PLATFORM_TIMEOUT,
                reason="§6.4: no ProcessRecoverStrategy within 300 s",
                code=WAIT_PLATFORM_STRATEGY_TIMEOUT_CODE,
            )
        )
        decision = Decision("exit", "§6.4: WaitPlatStrategyTimeout (508) → exit")
    else:
        decision = first_choice(inputs)
    attempt = 0
    tried: set[str] = set()
    while decision.strategy != "exit":
        strategy = decision.strategy
        if strategy in tried:  # defensive: the fallback order never repeats, but never loop forever
            decision = Decision("exit", f"{strategy} was already tried → exit")
            break
        tried.add(strategy)
        attempt += 1
        steps.append(Step(StepKind.CHOOSE, strategy, decision.reason))
        steps.append(_attempt_steps(inputs, strategy, attempt))
        name = _STATUS_NAME[strategy]
        if outcome(strategy, attempt):
            steps.append(
                Step(
                    StepKind.SUCCEEDED,
                    strategy,
                    f"ReportRecoverStatus: {strategy} succeeded",
                    recover_status=f"{name}-success",
                )
            )
            if strategy != "dump":
                steps.append(Step(StepKind.DONE, strategy, "training continues"))
                return steps
            # A dying-gasp checkpoint is saved; the processes still exit and are rescheduled (§7.2).
            decision = Decision("exit", "§7.2 dump: after the checkpoint the processes exit")
            break
        steps.append(
            Step(
                StepKind.FAILED,
                strategy,
                f"ReportRecoverStatus: {strategy} failed",
                recover_status=f"{name}-failed",
            )
        )
        decision = after_failure(inputs, strategy)
    dumped = bool(steps) and steps[-1].kind == StepKind.SUCCEEDED  # keep "dump-success" visible
    steps.append(Step(StepKind.CHOOSE, "exit", decision.reason))
    steps.append(
        Step(
            StepKind.EXIT,
            "exit",
            "stop training; the outer rescheduler takes over",
            recover_status=None if dumped else "exit-completed",
            signal="changeStrategy",
            change_strategy="exit",
            duration_s=PHASE_SECONDS["exit"],
        )
    )
    steps.extend(outer_rescheduling(inputs, "after exit"))
    return steps


def chosen_strategies(steps: list[Step]) -> list[str]:
    """The strategies in the order they were chosen (handy for tables and tests)."""
    return [s.strategy for s in steps if s.kind == StepKind.CHOOSE and s.strategy]

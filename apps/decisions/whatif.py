"""The what-if simulator: rehearse a policy against a sequence of faults before a real one happens.

It runs the same strategy choice and fallback chain as ClusterD (``mindcluster.clusterd``,
the pure model read from the MindCluster source that the simulated ClusterD also executes) and
accounts the restart budget across the faults. ``simulate`` starts from the PodGroup keys a policy
renders (what ClusterD would snapshot if the job were recreated with it); ``simulate_snapshot``
starts from the config ClusterD really snapshotted at the job's ``Init`` (the ``InitSuccess`` Event,
``RecoveryPolicy.describe`` format) or from a PodGroup's labels and annotations.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from apps.decisions.rules import FaultFacts, evaluate
from apps.policies.spec import FAULT_TYPES, PolicySpec, release_at_least
from mindcluster import clusterd as engine
from mindcluster import faults as vocab
from mindcluster import keys as c
from mindcluster.releases import DEFAULT_RELEASE, RELEASES

_WIRE_TYPE = {
    "uce": vocab.FAULT_UCE,
    "hccl": vocab.FAULT_HCCL,
    "normal": vocab.FAULT_OTHER,
    "node": vocab.FAULT_OTHER,
}


class ScenarioError(ValueError):
    """A fault scenario that cannot be simulated; ``field`` is its JSON pointer."""

    def __init__(self, field: str, message: str, allowed: list[Any] | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.allowed = allowed


@dataclass(frozen=True)
class FaultSpec:
    fault_type: str
    ranks: tuple[int, ...]
    level: str = ""
    node: str = ""
    code: str = ""
    # Outcome of each attempt (True success, False failure, an int = the agent's ReportRecoverStatus
    # code, e.g. 406); the last repeats; empty = all succeed.
    attempts: tuple[bool | int, ...] = ()
    platform_answer: str | None = None  # override the rules' answer in platform mode
    # Outcome per strategy name, checked before ``attempts`` (e.g. a replayed incident knows how each
    # strategy it tried went, not the order another policy would try them in).
    outcome_by_strategy: tuple[tuple[str, bool | int], ...] = ()
    rank_table_ready: bool = True  # platform mode: RankTableReady is exactly "true" when recover is chosen
    # The platform's standing answer before ClusterD writes ProcessConfirmFault; None = the same as
    # ``platform_answer`` (exit or "" there means no standing answer: code 508).
    platform_standing: str | None = None
    # The agent's stop-complete report (0, engine.NO_REPORT = silent, 404 = ProcessNotReady) and
    # whether it reports its strategies at all (D15).
    stop_report: int = 0
    strategy_reported: bool = True
    # After a scale-in success the fault pods' replacements come up, so ClusterD scales out again.
    scale_out: bool = False
    # Other faults flushed in the same event, as (type, global rank, level).
    also: tuple[tuple[str, int, str], ...] = ()


@dataclass
class Scenario:
    faults: list[FaultSpec]
    npus_per_pod: int = 8
    pods: int = 2
    spare_resources: bool = True
    supported: frozenset[str] | None = None  # None = what a correctly rendered job's TaskD reports
    framework: str = "pytorch"
    release: str | None = None  # the job's MindCluster release; None = the policy's (or the newest)
    wait_reschedule_s: int = engine.WAIT_RESCHEDULE_DEFAULT_S  # the live wait-reschedule-timeout
    live_in_place: bool | None = None  # the live PodGroup still allows recover-in-place; None = as snapshot


def _int(value: Any, where: str, minimum: int = 0, maximum: int = 1_000_000) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ScenarioError(where, f"must be an integer from {minimum} to {maximum}", [minimum, maximum])
    return value


# An attempt whose result the agent never reports: ClusterD waits 15 minutes (controller.go:36, D15).
NO_REPORT_ATTEMPT = "no-report"


def _is_attempt(value: Any) -> bool:
    if isinstance(value, bool) or value == NO_REPORT_ATTEMPT:
        return True
    # 201: a scale-in result asking ClusterD to isolate nodes first (controller.go:1468-1493).
    return isinstance(value, int) and (value in (0, engine.CODE_EXIT_ISOLATE_RANKS) or 400 <= value <= 599)


def parse_scenario(raw: Any) -> Scenario:
    """Validate a scenario body; every problem names its field."""
    if not isinstance(raw, dict):
        raise ScenarioError("/", "the scenario must be a JSON object with a 'faults' list")
    faults_raw = raw.get("faults")
    if not isinstance(faults_raw, list) or not faults_raw:
        raise ScenarioError("/faults", "give a non-empty list of faults")
    if len(faults_raw) > 100:
        raise ScenarioError("/faults", "at most 100 faults per scenario", [1, 100])
    pods = _int(raw.get("pods", 2), "/pods", 1, 20_000)
    npus = _int(raw.get("npus_per_pod", 8), "/npus_per_pod", 1, 64)
    faults = []
    for i, item in enumerate(faults_raw):
        where = f"/faults/{i}"
        if not isinstance(item, dict):
            raise ScenarioError(where, "each fault is an object with type and ranks")
        kind = item.get("type", "normal")
        if kind not in FAULT_TYPES:
            raise ScenarioError(f"{where}/type", f"unknown fault type {kind!r}", list(FAULT_TYPES))
        ranks = item.get("ranks", [item.get("rank", 0)])
        if not isinstance(ranks, list) or not ranks:
            raise ScenarioError(f"{where}/ranks", "give a non-empty list of global ranks")
        parsed_ranks = tuple(_int(r, f"{where}/ranks", 0, pods * npus - 1) for r in ranks)
        attempts = item.get("attempts", [])
        if not isinstance(attempts, list) or not all(_is_attempt(a) for a in attempts):
            raise ScenarioError(
                f"{where}/attempts",
                "a list of booleans (does each recovery attempt succeed) or ClusterD result codes "
                "(0 success, 400-599 failure, e.g. 405 / 406 / 499 after a retry; "
                f"201 a scale-in that isolates nodes first; {NO_REPORT_ATTEMPT!r}: the agent never reports, "
                "ClusterD gives up after 15 minutes)",
            )
        answer = item.get("platform_answer")
        if answer is not None and answer not in ("retry", "recover", "dump", "exit"):
            raise ScenarioError(
                f"{where}/platform_answer",
                "ClusterD accepts only these answers",
                ["retry", "recover", "dump", "exit"],
            )
        faults.append(
            FaultSpec(
                fault_type=kind,
                ranks=parsed_ranks,
                level=str(item.get("level", ""))[:40],
                node=str(item.get("node", ""))[:100],
                code=str(item.get("code", ""))[:20],
                attempts=tuple(engine.NO_REPORT if a == NO_REPORT_ATTEMPT else a for a in attempts),
                platform_answer=answer,
            )
        )
    supported = raw.get("supported")
    if supported is not None and (
        not isinstance(supported, list) or not all(isinstance(s, str) for s in supported)
    ):
        raise ScenarioError("/supported", "a list of strategy names TaskD reports as supported")
    spare = raw.get("spare_resources", True)
    if not isinstance(spare, bool):
        raise ScenarioError("/spare_resources", "must be true or false", [True, False])
    release = raw.get("release")
    if release is not None and release not in RELEASES:
        raise ScenarioError("/release", "unknown MindCluster release", list(RELEASES))
    wait_s = _int(
        raw.get("wait_reschedule_timeout", engine.WAIT_RESCHEDULE_DEFAULT_S),
        "/wait_reschedule_timeout",
        engine.WAIT_RESCHEDULE_MIN_S,
        engine.WAIT_RESCHEDULE_DEFAULT_S,
    )
    return Scenario(
        faults=faults,
        pods=pods,
        npus_per_pod=npus,
        spare_resources=spare,
        supported=frozenset(supported) if supported is not None else None,
        framework=str(raw.get("framework", "pytorch")),
        release=release,
        wait_reschedule_s=wait_s,
    )


def podgroup_keys(spec: PolicySpec) -> tuple[dict[str, str], dict[str, str]]:
    """Labels and annotations ClusterD reads on the PodGroup of a job running this policy."""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    if spec.fault_scheduling in ("grace", "force"):
        labels[c.LABEL_FAULT_SCHEDULING] = spec.fault_scheduling
    if spec.pod_rescheduling:
        labels[c.LABEL_POD_RESCHEDULING] = "on"
    if spec.sub_healthy_strategy != "ignore":
        labels[c.LABEL_SUB_HEALTHY_STRATEGY] = spec.sub_healthy_strategy
    if spec.strategies:
        annotations[c.ANNOTATION_RECOVER_STRATEGY] = spec.strategy_annotation
        # Set by hand up to 7.1, by the operator from 7.2 (mindcluster.md §2).
        labels[c.LABEL_PROCESS_RECOVER_ENABLE] = "on"
    if spec.platform_mode:
        annotations[c.ANNOTATION_PLATFORM_STRATEGY] = ""
    return labels, annotations


def default_supported(spec: PolicySpec, framework: str) -> frozenset[str]:
    supported = set(spec.strategies) | {"exit"}
    if framework != "pytorch" or not release_at_least(spec.mindcluster_version, "7.2"):
        supported.discard("elastic-training")
    return frozenset(supported)


@dataclass
class Budget:
    """Restarts left: ``backoffLimit`` (or ``fault-retry-times`` when it is unset) and torchrun's."""

    reschedules_left: int | None
    in_container_left: int
    used_reschedules: int = 0
    used_in_container: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)


def simulate(spec: PolicySpec, scenario: Scenario) -> dict[str, Any]:
    """Step by step what MindCluster would do for each fault, and the end state, if the job ran with
    ``spec`` from its creation (the config ClusterD would snapshot at Init)."""
    labels, annotations = podgroup_keys(spec)
    policy = engine.RecoveryPolicy.from_podgroup(labels, annotations)
    supported = (
        scenario.supported if scenario.supported is not None else default_supported(spec, scenario.framework)
    )
    limit = spec.backoff_limit if spec.backoff_limit is not None else (spec.fault_retry_times or None)
    if scenario.release is None:
        scenario = replace(scenario, release=spec.mindcluster_version)
    result = _simulate(policy, scenario, supported, limit, spec.max_restarts, spec)
    return {"podgroup": {"labels": labels, "annotations": annotations}, **result}


def simulate_snapshot(
    snapshot: engine.RecoveryPolicy | dict[str, Any],
    scenario: Scenario,
    *,
    spec: PolicySpec | None = None,
    restart_limit: int | None = None,
    max_restarts: int = 0,
) -> dict[str, Any]:
    """What MindCluster does for a running job whose Init snapshot is ``snapshot`` (a
    ``RecoveryPolicy`` or its ``describe()`` dict, as in the ``InitSuccess`` Event). ``spec`` only
    supplies the platform's decision rules; ``restart_limit`` is the backoffLimit / fault-retry-times
    the operator read at creation."""
    policy = (
        snapshot
        if isinstance(snapshot, engine.RecoveryPolicy)
        else engine.RecoveryPolicy.from_description(snapshot)
    )
    supported = (
        scenario.supported
        if scenario.supported is not None
        else frozenset(s for s in policy.configured if s in engine.PROCESS_STRATEGIES)
    )
    result = _simulate(policy, scenario, supported, restart_limit, max_restarts, spec)
    return {"snapshot": policy.describe(), **result}


def simulate_podgroup(
    labels: dict[str, str], annotations: dict[str, str], scenario: Scenario, **kw: Any
) -> dict[str, Any]:
    """``simulate_snapshot`` from a PodGroup's labels and annotations (what Init would read now)."""
    return simulate_snapshot(engine.RecoveryPolicy.from_podgroup(labels, annotations), scenario, **kw)


def _simulate(
    policy: engine.RecoveryPolicy,
    scenario: Scenario,
    supported: frozenset[str],
    limit: int | None,
    max_restarts: int,
    spec: PolicySpec | None,
) -> dict[str, Any]:
    budget = Budget(reschedules_left=limit, in_container_left=max_restarts)
    results = []
    job_state = "running"
    # The faults of a scale-in the job still runs without: ClusterD stays in ScaleInRunningState and
    # handles the next fault from there (rules.go:322-323; engine._plan_scaled_in).
    scaled_in: tuple[engine.RankFault, ...] = ()
    for index, fault in enumerate(scenario.faults):
        if job_state == "failed":
            results.append({"fault": index, "skipped": "the job has already failed"})
            continue
        inputs, platform_choice, platform_note = engine_input(
            policy, fault, index, scenario, supported, budget.reschedules_left, spec, scaled_in=scaled_in
        )
        steps = engine.plan(inputs, oracle(fault))
        while_scaled_in = bool(scaled_in)
        if engine.ends_scaled_in(steps):
            scaled_in = inputs.faults
        elif not all(step.kind == engine.StepKind.IGNORED for step in steps):
            scaled_in = ()
        consumed = {"reschedules": 0, "in_container_restarts": 0}
        for step in steps:
            if step.budget_change:
                consumed["reschedules"] += -step.budget_change
            if step.kind == engine.StepKind.ATTEMPT and step.strategy in ("recover-in-place", "recover"):
                consumed["in_container_restarts"] += 1
        budget.used_reschedules += consumed["reschedules"]
        budget.used_in_container += consumed["in_container_restarts"]
        if budget.reschedules_left is not None:
            budget.reschedules_left -= consumed["reschedules"]
        budget.in_container_left = max(0, budget.in_container_left - consumed["in_container_restarts"])
        if any(s.kind == engine.StepKind.JOB_FAILED for s in steps):
            job_state = "failed"
        results.append(
            {
                "fault": index,
                "fault_type": fault.fault_type,
                "ranks": list(fault.ranks),
                "platform": {"answer": platform_choice, "why": platform_note}
                if policy.platform_mode
                else None,
                "strategies": engine.chosen_strategies(steps),
                "while_scaled_in": while_scaled_in,
                # reset.json at globalFault: RestartFaultProcess of the fault list, None = no list
                # (controller.go:870-886, 960-966, 2138-2152).
                "restart_fault_process": engine.global_fault_restart_fault_process(inputs),
                "steps": [_step_dict(step) for step in steps],
                "budget_consumed": consumed,
                "outcome": _outcome(steps),
            }
        )
    return {
        "supported": sorted(supported),
        "faults": results,
        "end_state": {
            "job": job_state,
            "reschedules_used": budget.used_reschedules,
            "reschedules_left": budget.reschedules_left,
            "in_container_restarts_used": budget.used_in_container,
            "in_container_restarts_left": budget.in_container_left,
        },
    }


def engine_input(
    policy: engine.RecoveryPolicy,
    fault: FaultSpec,
    index: int,
    scenario: Scenario,
    supported: frozenset[str],
    restart_budget: int | None,
    spec: PolicySpec | None,
    *,
    scaled_in: tuple[engine.RankFault, ...] = (),
) -> tuple[engine.EngineInput, str | None, str | None]:
    """The engine's input for fault number ``index`` of ``scenario``, and the platform's answer (and
    why) when the snapshot is in platform mode. ``scaled_in``: the faults of the scale-in the job still
    runs without, when the previous fault ended scaled in."""
    rank_faults = tuple(
        engine.RankFault(
            rank=r,
            pod_rank=r // scenario.npus_per_pod,
            node=fault.node or f"node-{r // scenario.npus_per_pod}",
            fault_type=_WIRE_TYPE[kind],
            level=level or ("SeparateFault" if kind == "node" else ""),
            code=fault.code,
            node_fault=kind == "node",
        )
        for kind, r, level in (*((fault.fault_type, r, fault.level) for r in fault.ranks), *fault.also)
    )
    platform_choice, platform_note = None, None
    if policy.platform_mode:
        platform_choice, platform_note = _platform_answer(spec, fault, index)
    inputs = engine.EngineInput(
        policy=policy,
        supported=supported,
        faults=rank_faults,
        platform_choice=platform_choice,
        # No answer at all (no rules, nobody, no scenario answer): ClusterD gives up after 300 s.
        platform_timed_out=policy.platform_mode and platform_choice is None,
        spare_resources=scenario.spare_resources,
        restart_budget=restart_budget,
        rank_table_ready=fault.rank_table_ready,
        platform_standing=fault.platform_standing,
        framework=scenario.framework,
        release=scenario.release or DEFAULT_RELEASE,
        wait_reschedule_s=scenario.wait_reschedule_s,
        live_in_place=scenario.live_in_place,
        stop_report=fault.stop_report,
        strategy_reported=fault.strategy_reported,
        scale_out=fault.scale_out,
        scaled_in=scaled_in,
    )
    return inputs, platform_choice, platform_note


def oracle(fault: FaultSpec) -> Any:
    """What the agent reports for each attempt: ``outcome_by_strategy`` when it names the strategy,
    else attempt n as ``attempts`` says; past the list the last answer repeats (as in
    ``sim_fault --recovers``), and an empty list means every attempt succeeds."""
    attempts = fault.attempts
    by_strategy = dict(fault.outcome_by_strategy)

    def outcome(strategy: str, attempt: int) -> bool | int:
        if strategy in by_strategy:
            return by_strategy[strategy]
        if not attempts:
            return True
        return attempts[min(attempt, len(attempts)) - 1]

    return outcome


def _platform_answer(spec: PolicySpec | None, fault: FaultSpec, index: int) -> tuple[str | None, str]:
    if fault.platform_answer is not None:
        return fault.platform_answer, "answer given in the scenario"
    if spec is None:
        return None, "no platform rules given and no answer in the scenario"
    facts = FaultFacts(
        ranks=fault.ranks,
        fault_types=frozenset({fault.fault_type}),
        fault_levels=frozenset({fault.level}) if fault.level else frozenset(),
        repeats_in_window={
            int(r.match["repeat_within_s"]): index + 1
            for r in spec.decision_rules
            if "repeat_within_s" in r.match
        },
    )
    verdict = evaluate(spec, facts)
    if verdict.strategy == "ask":
        return spec.default_strategy, (
            f"{verdict.reason}; nobody answers in the rehearsal, so the default "
            f"({spec.default_strategy}) is written at the {spec.decision_timeout_s}s deadline"
        )
    return verdict.strategy, verdict.reason


def _step_dict(step: engine.Step) -> dict[str, Any]:
    return {
        "kind": step.kind,
        "strategy": step.strategy,
        "reason": step.reason,
        "label_changes": dict(step.label_changes),
        "budget_change": step.budget_change,
        "recover_status": step.recover_status,
        "signal": step.signal,
        "change_strategy": step.change_strategy,
        "extra_params": step.extra_params,
        "pod_ranks": list(step.pod_ranks),
        "duration_s": step.duration_s,
        "code": step.code,
    }


def _outcome(steps: list[engine.Step]) -> str:
    kinds = [s.kind for s in steps]
    if engine.StepKind.JOB_FAILED in kinds:
        return "job-failed"
    if engine.StepKind.JOB_RESCHEDULE in kinds:
        return "job-rescheduled"
    if engine.StepKind.POD_RESCHEDULE in kinds:
        return "pod-rescheduled"
    if engine.StepKind.IGNORED in kinds:
        return "ignored"
    if engine.StepKind.HOT_SWITCH_STUCK in kinds:
        return "hot-switch-stuck"
    for step in reversed(steps):
        if step.kind == engine.StepKind.SUCCEEDED:
            return f"recovered-by-{step.strategy}"
    return "unknown"

"""Replay one fault class through the what-if model and price the path ClusterD takes.

The path is ``engine.plan``'s steps (the same pure model the simulated ClusterD executes and the
conformance table checks against the MindCluster source). Its price is the sum of the step durations,
plus the rollback to the last checkpoint when training restarts from it: after Pod- or Job-level
rescheduling, unless a dump checkpoint was saved first (``reference/mindcluster.md`` §7.3: rollback is
half a checkpoint period on average).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from apps.advice.assumptions import ATTEMPT_NAMES, Assumption
from apps.advice.history import FaultClass
from apps.decisions import whatif
from apps.policies.spec import PolicySpec
from mindcluster import clusterd as engine
from mindcluster.clusterd import StepKind

_STEP_COST = {
    StepKind.EXIT: "exit_s",
    StepKind.DUMP_EXIT: "exit_s",
    StepKind.POD_RESCHEDULE: "pod_reschedule_s",
    StepKind.JOB_RESCHEDULE: "job_reschedule_s",
    StepKind.PLATFORM_TIMEOUT: "platform_wait_s",
}
_LABEL = {
    StepKind.EXIT: "exit",
    StepKind.POD_RESCHEDULE: "Pod-level rescheduling",
    StepKind.JOB_RESCHEDULE: "Job-level rescheduling",
    StepKind.PLATFORM_TIMEOUT: "no platform answer in 300 s",
    StepKind.JOB_FAILED: "the job fails",
    # Sub-health without hotSwitch / graceExit-with-dump-first, NotHandleFault, PreSeparateNPU: ClusterD
    # never starts a recovery (fault_recover_service.go:64, 331-352).
    StepKind.IGNORED: "not handled by ClusterD",
}


@dataclass(frozen=True)
class Path:
    """What one fault costs under one policy, without the rollback (added per checkpoint period)."""

    label: str  # e.g. "retry", "retry failed → recover", "dump → Job-level rescheduling"
    steps: tuple[str, ...]  # assumption names of the priced steps, in order
    rollback: bool
    fails: bool

    def seconds(self, durations: dict[str, Assumption], which: str = "value") -> float:
        base = getattr(durations["detect_s"], which) + getattr(durations["decide_s"], which)
        return base + sum(getattr(durations[name], which) for name in self.steps)


def path_of(steps: list[engine.Step]) -> Path:
    labels: list[str] = []
    priced: list[str] = []
    dump_saved = False
    rescheduled = False
    fails = False
    stopped = False  # training processes stop once; FaultRetry's second dump-exit finds them stopped
    for step in steps:
        if step.kind in (StepKind.EXIT, StepKind.DUMP_EXIT):
            if stopped:
                continue  # after exit / a dump result (rules.go:236-275, controller.go:1534-1568)
            stopped = True
        if step.kind == StepKind.ATTEMPT and step.strategy in ATTEMPT_NAMES:
            priced.append(ATTEMPT_NAMES[step.strategy])
            labels.append(step.strategy)
        elif step.kind == StepKind.FAILED and labels:
            labels[-1] += " failed"
        elif step.kind == StepKind.SUCCEEDED and step.strategy == "dump":
            dump_saved = True
        elif step.kind in _STEP_COST:
            priced.append(_STEP_COST[step.kind])
            if step.kind in _LABEL:
                labels.append(_LABEL[step.kind])
            rescheduled |= step.kind in (StepKind.POD_RESCHEDULE, StepKind.JOB_RESCHEDULE)
        elif step.kind == StepKind.JOB_FAILED:
            labels.append(_LABEL[step.kind])
            fails = True
        elif step.kind == StepKind.IGNORED:
            labels.append(_LABEL[step.kind])
        elif step.kind == StepKind.HOT_SWITCH_STUCK:
            # fault-scheduling off: Volcano never deletes the old pod and ClusterD waits without a timeout
            # (reschedule.go:108-114, rules.go:129-130). MindIO reported "train pause" before
            # (hot_switch_controller.go:151-187) and nothing resumes it: counted as failing the job —
            # inferred, not observed.
            labels.append("hot switch never finishes (fault-scheduling off)")
            fails = True
        elif step.kind == StepKind.ATTEMPT and step.strategy == engine.CHANGE_STRATEGY_MIGRATION:
            labels.append("hot switch (migration)")  # no published figure and no model duration priced
    return Path(" → ".join(labels) or "nothing", tuple(priced), rescheduled and not dump_saved, fails)


def replay(
    policy: engine.RecoveryPolicy,
    supported: frozenset[str],
    fault: FaultClass,
    scenario: whatif.Scenario,
    spec: PolicySpec | None,
) -> Path:
    """The path ClusterD takes for ``fault`` under the Init snapshot ``policy`` (fresh restart budget)."""
    if policy.platform_mode:  # the answer comes from the spec's rules: not cached (rules are dicts)
        inputs, _, _ = whatif.engine_input(policy, fault.fault, 0, scenario, supported, None, spec)
        return path_of(engine.plan(inputs, whatif.oracle(fault.fault)))
    # Outside platform mode the path is a pure function of hashable inputs: cache it per process.
    shape = (
        scenario.npus_per_pod,
        scenario.pods,
        scenario.spare_resources,
        scenario.framework,
        scenario.release,
    )
    return _cached(policy, supported, fault, shape)


@lru_cache(maxsize=65_536)
def _cached(
    policy: engine.RecoveryPolicy,
    supported: frozenset[str],
    fault: FaultClass,
    shape: tuple[int, int, bool, str, str | None],
) -> Path:
    npus_per_pod, pods, spare_resources, framework, release = shape
    scenario = whatif.Scenario(
        faults=[],
        npus_per_pod=npus_per_pod,
        pods=pods,
        spare_resources=spare_resources,
        framework=framework,
        release=release,
    )
    inputs, _, _ = whatif.engine_input(policy, fault.fault, 0, scenario, supported, None, None)
    return path_of(engine.plan(inputs, whatif.oracle(fault.fault)))


# What ClusterD would snapshot for a job, and which strategies its agent reports it supports.
EngineKey = tuple[engine.RecoveryPolicy, frozenset[str]]


def engine_key(spec: PolicySpec, framework: str) -> EngineKey:
    """What ClusterD would snapshot for a job created with ``spec``, and what its agent reports."""
    labels, annotations = whatif.podgroup_keys(spec)
    return engine.RecoveryPolicy.from_podgroup(labels, annotations), whatif.default_supported(spec, framework)

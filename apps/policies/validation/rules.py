"""Cross-field rules: what MindCluster does with a combination of settings on a release and a job.

Each rule reads a ``Draft`` (the fields that parsed cleanly) and an optional ``JobContext`` and
reports into an ``IssueCollector``. A rule is skipped when a field it depends on failed to parse.
Severity follows MindCluster's behaviour: an error where the setting would be dropped, rejected or
break the job; a warning where MindCluster degrades (falls back to a slower path) or the docs
advise against something that still works.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from apps.policies.spec import (
    STRATEGIES,
    STRATEGY_SINCE,
    JobContext,
    PolicySpec,
    release_at_least,
)
from mindcluster import keys as k

from .fields import normalise_release
from .issues import IssueCollector, pointer

# Ports a pod of a MindCluster job already uses; the MindIO controller must not take one of them.
RESERVED_PORTS = {
    k.PORT_TASKD[1]: f"{k.PORT_TASKD[0]} (TaskD manager)",
    k.TASKD_PROXY_PORT: "the TaskD proxy",
    k.PORT_ASCENDJOB[1]: f"{k.PORT_ASCENDJOB[0]} (the operator's default)",
    k.CLUSTERD_GRPC_PORT: "ClusterD gRPC",
}
# Env the 7.2+ operator appends to the ascend container whenever recover-strategy is set (§3.3).
OPERATOR_RECOVERY_ENV = (
    k.ENV_PROCESS_RECOVER,
    k.ENV_ELASTIC_PROCESS_RECOVER_ENABLE,
    k.ENV_ENABLE_RESTART_FAULT_PROCESS,
)
# ring-controller.atlas values of A2/A3 servers ("ascend-910b"), where unconditional retry is documented.
_A2_RING_CONTROLLER = re.compile(r"^ascend-\d+b$")
_DEFAULTS = PolicySpec()


@dataclass
class Draft:
    """Field values as parsed so far; starts from the PolicySpec defaults."""

    values: dict[str, object] = field(default_factory=dict)
    strategy_where: dict[str, str] = field(default_factory=dict)
    bad: set[str] = field(default_factory=set)  # fields that failed to parse
    given: set[str] = field(default_factory=set)  # fields present in the input

    def usable(self, *names: str) -> bool:
        return not self.bad.intersection(names)

    def where(self, strategy: str) -> str:
        return self.strategy_where.get(strategy, pointer("strategies"))

    @property
    def release(self) -> str | None:
        value = self.values["mindcluster_version"]
        return value if isinstance(value, str) and self.usable("mindcluster_version") else None

    @property
    def strategies(self) -> list[str]:
        value = self.values["strategies"]
        return list(value) if isinstance(value, list | tuple) else []


def check_all(draft: Draft, job: JobContext | None, out: IssueCollector) -> None:
    """Run every cross-field rule."""
    _check_release(draft, job, out)
    _check_strategy_mix(draft, out)
    _check_rescheduling(draft, job, out)
    _check_ports(draft, out)
    if job is not None:
        _check_framework(draft, job, out)
        _check_job_env(draft, job, out)


def _check_release(draft: Draft, job: JobContext | None, out: IssueCollector) -> None:
    release = draft.release
    if release is None:
        return
    if draft.usable("strategies"):
        for name in draft.strategies:
            since = STRATEGY_SINCE[name]
            if not release_at_least(release, since):
                available = [s for s in STRATEGIES if release_at_least(release, STRATEGY_SINCE[s])]
                out.error(
                    "strategy_not_in_release",
                    draft.where(name),
                    f"{name} needs MindCluster {since} or newer; this policy targets {release}, where "
                    f"ClusterD ignores it and the job falls back to slower recovery.",
                    available,
                )
    timeout = draft.values["wait_reschedule_timeout"]
    if (
        draft.usable("wait_reschedule_timeout")
        and timeout != _DEFAULTS.wait_reschedule_timeout
        and not release_at_least(release, "7.2")
    ):
        out.warn(
            "setting_not_in_release",
            pointer("wait_reschedule_timeout"),
            f"The wait-reschedule-timeout annotation exists from MindCluster 7.2; on {release} it is "
            f"ignored and ClusterD waits its built-in time.",
        )
    if job is not None and job.mindcluster_version:
        job_release = normalise_release(job.mindcluster_version) or job.mindcluster_version
        if job_release != release:
            out.warn(
                "release_mismatch",
                pointer("mindcluster_version"),
                f"The policy targets MindCluster {release} but the job runs {job_release}; labels, env and "
                f"launcher lines are rendered for the policy's release.",
            )


def _check_strategy_mix(draft: Draft, out: IssueCollector) -> None:
    strategies = draft.strategies
    usable = draft.usable("strategies")
    sub_healthy = draft.values["sub_healthy_strategy"] if draft.usable("sub_healthy_strategy") else None
    if usable and strategies == ["exit"]:
        out.warn(
            "exit_only",
            draft.where("exit"),
            "ClusterD appends exit on its own; configuring only exit switches on the process-level "
            "machinery without any faster strategy (add retry, recover or dump, or leave it empty).",
        )
    if usable and sub_healthy == "graceExit" and "dump" not in strategies:
        out.error(
            "grace_exit_requires_dump",
            pointer("sub_healthy_strategy"),
            "graceExit saves a dying-gasp checkpoint before rescheduling, which needs the dump strategy; "
            'add "dump" to strategies or pick another sub_healthy_strategy.',
        )
    _check_grace_exit_order(draft, sub_healthy, out)
    if usable and sub_healthy == "hotSwitch" and draft.release and not release_at_least(draft.release, "7.2"):
        # The hot-switch controller (hot_switch_controller.go) and Init's hotSwitch snapshot
        # (fault_recover_service.go:550-555) exist from v7.2.RC1 (source facts, coverage gaps).
        out.error(
            "hot_switch_needs_7_2",
            pointer("sub_healthy_strategy"),
            f"hotSwitch exists from MindCluster 7.2; on {draft.release} ClusterD does not know it, so "
            "sub-healthy faults are skipped.",
        )
    platform = draft.usable("platform_mode") and bool(draft.values["platform_mode"])
    if (
        usable
        and platform
        and "retry" in strategies
        and draft.release
        and release_at_least(draft.release, "26.0")
    ):
        # v26: a new hardware fault gets preExitProcess unless retry is supported, and in platform mode
        # supportRetryStrategy needs platStrategy == retry, which is still empty then
        # (fault_recover_service.go:181-187, controller.go:364-370; source facts D5, inferred).
        out.warn(
            "platform_retry_after_pre_exit",
            draft.where("retry"),
            f"On MindCluster {draft.release} ClusterD sends preExitProcess to a faulty pod before it reads "
            "the platform's answer, and in platform_mode retry does not count as supported at that "
            "point: a UCE/HCCL fault most likely ends in exit instead of a step retry (read from the "
            "source, not observed on hardware). Outside platform_mode retry is unaffected.",
        )
    # hotSwitch is allowed on its own: the operator injects the recovery env for it and ClusterD's Init
    # accepts it without recover-strategy. It still needs TaskD and MindIO in the image, so say so.
    if usable and sub_healthy == "hotSwitch" and not strategies:
        out.warn(
            "hot_switch_without_strategies",
            pointer("sub_healthy_strategy"),
            "hotSwitch moves training to a backup pod through the process-level machinery (TaskD and "
            "MindIO in the image) even though no strategies are configured.",
        )
    max_restarts = draft.values["max_restarts"]
    if usable and strategies and draft.usable("max_restarts") and max_restarts == 0:
        out.warn(
            "no_in_container_restarts",
            pointer("max_restarts"),
            "With --max_restarts 0 torchrun stops instead of restarting processes inside the container, "
            "so process-level strategies fall back to rescheduling; the TaskD default is 32767.",
        )


# ClusterD's priority order of configured strategies (recoverStrategyPriorityMap): these come before dump.
_BEFORE_DUMP: Final = ("retry", "recover-in-place", "recover", "elastic-training")


def _check_grace_exit_order(draft: Draft, sub_healthy: object, out: IssueCollector) -> None:
    """graceExit acts only with dump first (source facts D3/D8).

    A sub-healthy fault is skipped unless ``onlySupportDumpStrategy`` holds
    (``fault_recover_service.go:331-352``): the priority-sorted configuration must start with dump
    (``controller.go:448-456``), and in platform mode the answer ClusterD holds must be dump
    (``controller.go:436-446``), i.e. the standing answer, read before it asks.
    """
    strategies = draft.strategies if draft.usable("strategies") else []
    if sub_healthy != "graceExit" or "dump" not in strategies:
        return
    before = [s for s in _BEFORE_DUMP if s in strategies]
    platform_mode = draft.usable("platform_mode") and draft.values["platform_mode"] is True
    default = draft.values.get("default_strategy") if draft.usable("default_strategy") else None
    if before:
        why = f"{', '.join(before)} come{'s' if len(before) == 1 else ''} before dump in ClusterD's order"
    elif platform_mode and default != "dump":
        why = f'in platform_mode the standing answer must be dump, but default_strategy is "{default}"'
    else:
        return
    out.warn(
        "grace_exit_needs_dump_first",
        pointer("sub_healthy_strategy"),
        f"graceExit saves a checkpoint at a sub-healthy fault only when dump is the first strategy ClusterD "
        f"has ({why}); otherwise every sub-healthy fault is skipped.",
    )


def _check_rescheduling(draft: Draft, job: JobContext | None, out: IssueCollector) -> None:
    scheduling = draft.values["fault_scheduling"] if draft.usable("fault_scheduling") else None
    strategies = draft.strategies if draft.usable("strategies") else []
    release = draft.release
    if scheduling == "force" and strategies and release is not None and release_at_least(release, "7.2"):
        out.warn(
            "force_with_process_strategies",
            pointer("fault_scheduling"),
            f"From MindCluster 7.2 the docs require fault_scheduling grace with process-level strategies; "
            f"force still works as the Job-level fallback on {release} but deletes pods without a grace "
            f"period.",
            ["grace"],
        )
    if scheduling == "off" and strategies:
        out.warn(
            "no_job_level_backstop",
            pointer("fault_scheduling"),
            "With fault_scheduling off nothing restarts the job after ClusterD's final exit; the 26.1 "
            "release notes recommend keeping Job-level rescheduling as the backstop.",
            ["grace", "force"],
        )
    sub_healthy = draft.values["sub_healthy_strategy"] if draft.usable("sub_healthy_strategy") else None
    if scheduling == "off" and sub_healthy == "hotSwitch":
        # The hot switch needs Volcano to delete the old pod (ClusterD annotates it needVolcanoOpe=delete,
        # hot_switch_controller.go:109-123), and Volcano skips a job whose fault-scheduling is off
        # (ascend-for-volcano internal/rescheduling/reschedule.go:108-114, task.go:57-72); ClusterD waits
        # for the deletion without a timeout (rules.go:129-130).
        out.warn(
            "hot_switch_needs_fault_scheduling",
            pointer("fault_scheduling"),
            "hotSwitch needs Volcano to delete the old pod once the backup pod runs, and Volcano ignores "
            "jobs with fault_scheduling off: the switch would never finish (ClusterD waits for the "
            "deletion without a timeout). Use grace or force.",
            ["grace", "force"],
        )
    if scheduling == "off" and draft.usable("pod_rescheduling") and draft.values["pod_rescheduling"] is True:
        out.warn(
            "pod_rescheduling_without_job_rescheduling",
            pointer("pod_rescheduling"),
            "Pod-level rescheduling falls back to Job-level rescheduling (always when rank 0 fails), "
            "which fault_scheduling off disables.",
        )
    if job is None:
        return
    if scheduling == "force":
        host_net = [r.role for r in job.replicas if r.host_network]
        if host_net:
            out.error(
                "force_with_host_network",
                pointer("fault_scheduling"),
                f"fault_scheduling force cannot be combined with hostNetwork, which the "
                f"{', '.join(host_net)} pods use; use grace.",
                ["grace", "off"],
            )
    retry_times = draft.values["fault_retry_times"]
    if draft.usable("fault_retry_times") and isinstance(retry_times, int) and retry_times > 0:
        for replica in job.replicas:
            if replica.restart_policy not in ("", "Never"):
                out.error(
                    "retry_times_requires_restart_never",
                    pointer("fault_retry_times"),
                    f"Unconditional retry needs restartPolicy Never, but replica {replica.role} has "
                    f"{replica.restart_policy}; the operator would not count or retry its failures.",
                    ["Never"],
                )
        ring = job.labels.get(k.LABEL_RING_CONTROLLER)
        if ring and not _A2_RING_CONTROLLER.match(ring):
            out.warn(
                "unconditional_retry_hardware",
                pointer("fault_retry_times"),
                f"The docs support unconditional retry only on Atlas 800T A2 / 900 A2 PoD, but the job's "
                f"{k.LABEL_RING_CONTROLLER} label is {ring}.",
            )


def _check_ports(draft: Draft, out: IssueCollector) -> None:
    port = draft.values["ttp_port"]
    if draft.usable("ttp_port") and port in RESERVED_PORTS:
        out.error(
            "ttp_port_conflict",
            pointer("ttp_port"),
            f"ttp_port {port} is already used by {RESERVED_PORTS[port]}; the MindIO controller needs its "
            f"own port (8000 is the usual choice).",
        )


def _check_framework(draft: Draft, job: JobContext, out: IssueCollector) -> None:
    framework = job.framework
    strategies = draft.strategies if draft.usable("strategies") else []
    if "elastic-training" in strategies and framework in ("mindspore", "tensorflow"):
        out.error(
            "elastic_training_requires_pytorch",
            draft.where("elastic-training"),
            f"elastic-training works only for PyTorch; for a {framework} job the operator ignores it "
            f"with a warning and recovery falls back to the next strategy.",
        )
    sub_healthy = draft.values["sub_healthy_strategy"] if draft.usable("sub_healthy_strategy") else None
    if sub_healthy == "hotSwitch" and framework not in ("pytorch", "mindspore"):
        # skipHandleSubHealthyHotSwitch turns the job's snapshot to ignore (fault_recover_service.go:352-359).
        out.error(
            "hot_switch_unsupported_framework",
            pointer("sub_healthy_strategy"),
            f"hotSwitch works only for PyTorch and MindSpore jobs; for a {framework} job ClusterD sets "
            "the strategy to ignore at the first sub-healthy fault.",
        )
    if strategies and framework == "tensorflow":
        out.warn(
            "process_recovery_unsupported_framework",
            pointer("strategies"),
            "Process-level recovery needs MindIO, which exists for PyTorch and MindSpore only; for a "
            "TensorFlow job ClusterD never hears from the job and falls back to rescheduling.",
        )
    if "retry" in strategies and framework == "mindspore":
        out.warn(
            "retry_mindspore_watchdog",
            draft.where("retry"),
            "retry on MindSpore also needs context.ascend_config.hccl_watchdog: False in the model YAML, "
            "otherwise the HCCL watchdog kills the processes before retry can run.",
        )
    if strategies and job.scheduler_name and job.scheduler_name != k.VOLCANO_SCHEDULER:
        out.error(
            "gang_scheduling_required",
            pointer("strategies"),
            f"Process-level strategies need the Volcano gang scheduler (ClusterD reads the PodGroup), but "
            f"the job uses schedulerName {job.scheduler_name}: no PodGroup exists, so recovery never starts.",
            [k.VOLCANO_SCHEDULER],
        )


def _check_job_env(draft: Draft, job: JobContext, out: IssueCollector) -> None:
    strategies = draft.strategies if draft.usable("strategies") else []
    if "retry" in strategies and job.framework in (None, "pytorch"):
        culprits = [r.role for r in job.replicas if k.ENV_PYTORCH_NO_NPU_MEMORY_CACHING in r.env_names]
        if culprits:
            out.error(
                "retry_with_no_npu_memory_caching",
                draft.where("retry"),
                f"retry needs {k.ENV_PYTORCH_NO_NPU_MEMORY_CACHING} unset, but the ascend container of "
                f"{', '.join(culprits)} sets it; MindIO's memory-fault repair relies on the NPU caching "
                f"allocator.",
            )
    release = draft.release
    hot_switch = draft.usable("sub_healthy_strategy") and draft.values["sub_healthy_strategy"] == "hotSwitch"
    if release is None or not release_at_least(release, "7.2") or not (strategies or hot_switch):
        return
    where = pointer("strategies") if strategies else pointer("sub_healthy_strategy")
    for replica in job.replicas:
        duplicated = [name for name in OPERATOR_RECOVERY_ENV if name in replica.env_names]
        if duplicated:
            out.warn(
                "operator_injected_env",
                where,
                f"From MindCluster 7.2 the operator injects {', '.join(duplicated)} itself; the copies in "
                f"replica {replica.role} would appear twice in the pod env. Remove them from the manifest.",
            )
    if k.LABEL_PROCESS_RECOVER_ENABLE in job.labels:
        out.warn(
            "operator_injected_env",
            where,
            f"From MindCluster 7.2 the operator sets the {k.LABEL_PROCESS_RECOVER_ENABLE} label on the "
            f"PodGroup and ClusterD toggles it; remove the hand-set label from the job.",
        )

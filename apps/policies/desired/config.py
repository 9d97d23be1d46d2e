"""The creation config: the recovery values MindCluster reads once, when a job is created.

ClusterD snapshots them at the job's first ``Init``; the operator reads its part in the job-create
handler. The in-effect view compares the config a revision would create a job with against the one
the cluster created it with.
"""

from __future__ import annotations

from typing import Any

from apps.policies.rendering.keys import policy_keys
from apps.policies.rendering.plan import RenderPlan
from apps.policies.rendering.when import BACKOFF_LIMIT_KEY, PLATFORM_MODE_KEY
from apps.policies.spec import STRATEGY_PRIORITY, PolicySpec
from mindcluster import keys as c

PLATFORM_MODE = "platform-mode"
CONFIG_KEYS: tuple[str, ...] = (
    c.ANNOTATION_RECOVER_STRATEGY,
    c.LABEL_FAULT_SCHEDULING,
    c.LABEL_POD_RESCHEDULING,
    c.LABEL_SUB_HEALTHY_STRATEGY,
    c.LABEL_PROCESS_RECOVER_ENABLE,
    PLATFORM_MODE,
    c.LABEL_FAULT_RETRY_TIMES,
    BACKOFF_LIMIT_KEY,
)
Config = dict[str, str | None]


def normalize_strategies(raw: str | None) -> str | None:
    """``recover-strategy`` as ClusterD keeps it: known names, priority order (utils.go:107-123).

    ClusterD splits on commas without trimming, so ``"retry, dump"`` keeps only ``retry``; and it
    always adds ``exit`` (utils.go:122), so ``exit`` says nothing about a config and is left out.
    """
    if not raw:
        return None
    names = {name for name in raw.split(",") if name in STRATEGY_PRIORITY and name != "exit"}
    return ",".join(sorted(names, key=STRATEGY_PRIORITY.__getitem__)) or None


def config_from_keys(
    labels: dict[str, str], annotations: dict[str, str], backoff_limit: Any = None
) -> Config:
    """The creation config that PodGroup-style labels/annotations (and a backoffLimit) express."""
    scheduling = labels.get(c.LABEL_FAULT_SCHEDULING)
    enable = labels.get(c.LABEL_PROCESS_RECOVER_ENABLE)
    retry = labels.get(c.LABEL_FAULT_RETRY_TIMES)
    return {
        c.ANNOTATION_RECOVER_STRATEGY: normalize_strategies(annotations.get(c.ANNOTATION_RECOVER_STRATEGY)),
        c.LABEL_FAULT_SCHEDULING: scheduling if scheduling in ("grace", "force") else None,
        c.LABEL_POD_RESCHEDULING: "on" if labels.get(c.LABEL_POD_RESCHEDULING) == "on" else None,
        # Absent and "ignore" act alike: ClusterD only acts on graceExit / hotSwitch (utils.go:130-138).
        c.LABEL_SUB_HEALTHY_STRATEGY: (
            None
            if labels.get(c.LABEL_SUB_HEALTHY_STRATEGY) in (None, "", "ignore")
            else labels[c.LABEL_SUB_HEALTHY_STRATEGY]
        ),
        # ClusterD flips it between on and pause during a fallback; both mean "created on".
        c.LABEL_PROCESS_RECOVER_ENABLE: "on" if enable in ("on", "pause") else None,
        PLATFORM_MODE: "on" if c.ANNOTATION_PLATFORM_STRATEGY in annotations else None,
        c.LABEL_FAULT_RETRY_TIMES: retry if retry and retry != "0" else None,
        BACKOFF_LIMIT_KEY: str(backoff_limit) if backoff_limit not in (None, "", 0) else None,
    }


def config_of_keys(labels: dict[str, str], annotations: dict[str, str], spec: PolicySpec) -> Config:
    """The creation config of the keys ``spec`` renders."""
    labels = dict(labels)
    if annotations.get(c.ANNOTATION_RECOVER_STRATEGY):
        # The operator adds it to the PodGroup it creates from a job with recover-strategy
        # (component/ascend-operator/pkg/controllers/v1/job.go:479-491); up to 7.1 we render it ourselves.
        labels[c.LABEL_PROCESS_RECOVER_ENABLE] = "on"
    return config_from_keys(labels, dict(annotations), spec.backoff_limit)


def creation_config_of(spec: PolicySpec) -> Config:
    """The creation config of ``spec`` without a full render (the keys do not depend on the manifest)."""
    plan = RenderPlan(
        spec=spec, framework="pytorch", job_name="", namespace=None, node_nums=1, proc_per_node=1
    )
    keys = policy_keys(plan)
    return config_of_keys(keys.labels, keys.annotations, spec)


def podgroup_accepts_init(spec: PolicySpec) -> bool:
    """Whether the PodGroup keys a push of ``spec`` writes make ClusterD accept ``Init``.

    A refused Init is retried every second and kept nowhere (TaskD,
    component/taskd/taskd/go/framework_backend/manager/manager.go:468-492; ClusterD,
    component/clusterd/pkg/application/recover/fault_recover_service.go:579-585), so a written
    ``process-recover-enable=on`` (we write it only up to 7.1) or ``subHealthyStrategy=hotSwitch``
    is read at the next retry (:550-555) — the rest of the push with it.
    """
    plan = RenderPlan(
        spec=spec, framework="pytorch", job_name="", namespace=None, node_nums=1, proc_per_node=1
    )
    labels: dict[str, str | None] = policy_keys(plan).podgroup_patch["metadata"]["labels"]
    return labels.get(c.LABEL_PROCESS_RECOVER_ENABLE) == "on" or (
        labels.get(c.LABEL_SUB_HEALTHY_STRATEGY) == "hotSwitch"
    )


def config_changes(before: Config, after: Config) -> list[str]:
    """Creation-config keys whose value differs (UI names: platform mode is named for what it is)."""
    return [
        PLATFORM_MODE_KEY if key == PLATFORM_MODE else key
        for key in CONFIG_KEYS
        if before.get(key) != after.get(key)
    ]

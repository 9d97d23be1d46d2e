"""``render(manifest, spec)``: one validated policy merged into one AscendJob."""

from __future__ import annotations

from typing import Any

from apps.policies.spec import PolicySpec
from apps.taskd.manager_script import render_manager_py
from mindcluster import keys as k

from . import artifacts as art
from .configmap import taskd_configmap
from .keys import PolicyKeys, policy_keys, standing_answer
from .manifest import (
    TASKD_MOUNT_PATH,
    TASKD_VOLUME_NAME,
    TemplateChanges,
    copy_document,
    desired_env,
    desired_ports,
    merge_backoff_limit,
    merge_metadata,
    merge_templates,
)
from .plan import MINDSPORE, PYTORCH, RenderPlan
from .result import Artifacts, Effect, RenderResult
from .when import BACKOFF_LIMIT_KEY, PLATFORM_MODE_KEY, TARGET_WHEN, key_when


def render(manifest: dict[str, Any], spec: PolicySpec) -> RenderResult:
    """Merge ``spec`` into a copy of the AscendJob ``manifest``; the input is never modified.

    ``spec`` must already be valid (``validate_policy``); the manifest may be a user's file or the live
    object (status, resourceVersion and other fields are carried through untouched).
    """
    if not isinstance(manifest, dict):
        raise TypeError(f"manifest must be a mapping, got {type(manifest).__name__}")
    plan = RenderPlan.build(manifest, spec)
    merged = copy_document(manifest)
    keys = policy_keys(plan)
    merge_metadata(merged, keys)
    run_policy_patch = merge_backoff_limit(merged, spec.backoff_limit)
    changes = merge_templates(merged, plan)

    artifacts = _artifacts(plan)
    configmap = (
        taskd_configmap(plan, artifacts.manager_py, artifacts.launcher)
        if artifacts.manager_py is not None
        else None
    )
    return RenderResult(
        manifest=merged,
        labels=dict(keys.labels),
        annotations=dict(keys.annotations),
        removed_labels=keys.removed_labels,
        removed_annotations=keys.removed_annotations,
        podgroup_patch=keys.podgroup_patch,
        job_patch=_job_patch(keys, run_policy_patch, changes),
        configmap=configmap,
        artifacts=artifacts,
        effects=_effects(plan, keys, changes, artifacts, _replicas(manifest) != _replicas(merged), manifest),
        notes=_notes(plan, manifest),
    )


def _artifacts(plan: RenderPlan) -> Artifacts:
    manager_py = None
    if plan.uses_taskd:
        # A job without NPU requests still gets a runnable manager; _notes asks the user to check it.
        manager_py = render_manager_py(
            node_nums=max(plan.node_nums, 1), proc_per_node=max(plan.proc_per_node, 1)
        )
    return Artifacts(
        dockerfile=art.dockerfile(plan),
        launcher=art.launcher(plan),
        training_flags=art.training_flags(plan),
        manager_py=manager_py,
    )


def _job_patch(
    keys: PolicyKeys, run_policy_patch: dict[str, Any] | None, changes: TemplateChanges
) -> dict[str, Any]:
    spec_patch: dict[str, Any] = {}
    if run_policy_patch is None:
        spec_patch["runPolicy"] = None
    elif run_policy_patch:
        spec_patch["runPolicy"] = run_policy_patch
    if changes.replica_patches:
        spec_patch["replicaSpecs"] = changes.replica_patches
    patch: dict[str, Any] = {"metadata": keys.job_metadata_patch()}
    if spec_patch:
        patch["spec"] = spec_patch
    return patch


def _effects(
    plan: RenderPlan,
    keys: PolicyKeys,
    changes: TemplateChanges,
    artifacts: Artifacts,
    templates_changed: bool,
    manifest: dict[str, Any],
) -> tuple[Effect, ...]:
    """What each part of the policy changes and when that takes effect (``when.py`` decides)."""
    effects = [*_metadata_effects(plan, keys, manifest)]
    what = [e["name"] for e in desired_env(plan)] + [f"port {p['name']}" for p in desired_ports(plan)]
    if plan.uses_taskd:
        what.append(f"volume {TASKD_VOLUME_NAME} (ConfigMap {plan.configmap_name})")
    if templates_changed or (changes.roles and what):
        change = ", ".join(what) if what else "takes back the env, ports and volumes an earlier policy added"
        effects.append(
            Effect(
                "pod-template",
                TARGET_WHEN["pod-template"],
                f"ascend container of {', '.join(changes.roles)}: {change}; running pods keep their old spec "
                f"until they are next created (rescheduling, restart or recreation of the job)",
                tuple(what),
            )
        )
    if artifacts.manager_py is not None:
        effects.append(
            Effect(
                "configmap",
                TARGET_WHEN["configmap"],
                f"ConfigMap {plan.configmap_name}: manager.py and the launcher lines, read when training "
                "starts",
                ("manager.py",),
            )
        )
    if plan.needs_agent and plan.framework in (PYTORCH, MINDSPORE):
        effects.append(
            Effect(
                "image",
                TARGET_WHEN["image"],
                "rebuild the training image with Dockerfile.snippet",
                ("Dockerfile.snippet",),
            )
        )
        effects.append(
            Effect(
                "launcher",
                TARGET_WHEN["launcher"],
                "add launcher.sh to the training start script",
                ("launcher.sh",),
            )
        )
    if artifacts.training_flags:
        effects.append(
            Effect(
                "training-script",
                TARGET_WHEN["training-script"],
                "training flags/config from training-flags.txt",
                ("training-flags.txt",),
            )
        )
    return tuple(effects)


def _metadata_effects(plan: RenderPlan, keys: PolicyKeys, manifest: dict[str, Any]) -> list[Effect]:
    """The recovery keys, split by who reads them and when (facts §1)."""
    meta = manifest.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    present = {**(meta.get("labels") or {}), **(meta.get("annotations") or {})}
    at_creation: list[str] = []  # ClusterD's Init snapshot (copied to the PodGroup by the operator)
    by_operator: list[str] = []  # read by the operator in its job-create handler
    live: list[str] = []  # read by ClusterD at every fault
    names: dict[str, list[str]] = {"creation": [], "operator": [], "live": []}
    for section, values, removed in (
        ("labels", keys.labels, keys.removed_labels),
        ("annotations", keys.annotations, keys.removed_annotations),
    ):
        for key, value in [*values.items(), *((key, None) for key in removed)]:
            text = f"{key}={value!r}" if value is not None else f"no {key}"
            if key == k.ANNOTATION_PLATFORM_STRATEGY:
                at_creation.append("platform mode on" if value is not None else "platform mode off")
                names["creation"].append(PLATFORM_MODE_KEY)
                if value:  # the standing answer itself is read at each fault
                    live.append(text)
                    names["live"].append(key)
                continue
            if key == k.LABEL_PROCESS_RECOVER_ENABLE and not plan.hand_set_recovery_env:
                # From 7.2 the operator sets it on the PodGroup it creates, from recover-strategy.
                text = (
                    f"{key}='on' (set by the operator from recover-strategy)"
                    if plan.strategies
                    else f"no {key} (the operator sets it only with recover-strategy)"
                )
            if key_when(section, key) == "live":
                if value is None and key not in present:
                    continue  # nothing to remove: a live key matters only when it changes
                live.append(text)
                names["live"].append(key)
            elif key == k.LABEL_FAULT_RETRY_TIMES:
                by_operator.append(text)
                names["operator"].append(key)
            else:
                at_creation.append(text)
                names["creation"].append(key)
    if plan.spec.backoff_limit is not None:
        by_operator.append(f"{BACKOFF_LIMIT_KEY}={plan.spec.backoff_limit}")
    else:
        by_operator.append(f"no {BACKOFF_LIMIT_KEY} (unlimited)")
    names["operator"].append(BACKOFF_LIMIT_KEY)
    effects = [
        Effect(
            "podgroup",
            "recreate",
            "read once, when the job is created: the operator copies these keys to PodGroup <job>-<uid> and "
            "ClusterD snapshots them at the job's first Init; on a running job they wait for the job to be "
            "recreated: " + ", ".join(at_creation),
            tuple(names["creation"]),
        ),
        Effect(
            "ascendjob",
            "recreate",
            "read by the operator only when it creates the job (the restart budget); on a running job they "
            "wait for the job to be recreated: " + ", ".join(by_operator),
            tuple(names["operator"]),
        ),
    ]
    if live:
        effects.append(
            Effect(
                "podgroup",
                "live",
                "read by ClusterD on the PodGroup at every fault, so they apply from the next fault: "
                + ", ".join(live),
                tuple(names["live"]),
            )
        )
    return effects


def _replicas(manifest: dict[str, Any]) -> Any:
    spec = manifest.get("spec")
    return spec.get("replicaSpecs") if isinstance(spec, dict) else None


def _notes(plan: RenderPlan, manifest: dict[str, Any]) -> tuple[str, ...]:
    notes: list[str] = []
    if plan.uses_taskd:
        notes.append(
            f'If training fails with "{art.LIBTASKD_ERROR}", preload libtaskd.so: {art.LD_PRELOAD_LINE} '
            f"(launcher.sh already does; the path comes from `pip show taskd`, field Location)."
        )
        notes.append(
            f"ConfigMap {plan.configmap_name} must exist before the pods start: the pod templates mount "
            f"it at "
            f"{TASKD_MOUNT_PATH}."
        )
        if plan.proc_per_node < 1 or plan.node_nums < 1:
            notes.append(
                "No NPU requests (huawei.com/Ascend*, huawei.com/npu*) or no pods were found in the job: "
                "check "
                "node_nums and proc_per_node in manager.py."
            )
    if plan.strategies and plan.hand_set_recovery_env:
        notes.append(
            f"MindCluster {plan.release}: the {k.LABEL_PROCESS_RECOVER_ENABLE} label and the recovery env "
            f"({k.ENV_PROCESS_RECOVER} …) are set by this policy; from 7.2 the operator injects them itself."
        )
    if plan.strategies and not plan.hand_set_recovery_env and plan.framework == PYTORCH:
        notes.append(
            "The operator sets HIGH_AVAILABILITY from recover-strategy; MindSpeed-LLM 2.3.0+ reads it, so "
            "training-flags.txt is needed only with older MindSpeed-LLM."
        )
    old_limit = ((manifest.get("spec") or {}).get("runPolicy") or {}).get("backoffLimit")
    if plan.spec.backoff_limit is None and old_limit is not None:
        notes.append(
            f"runPolicy.backoffLimit ({old_limit}) is removed: the policy sets no limit (unlimited)."
        )
    if plan.spec.platform_mode:
        notes.append(
            f"Platform mode: {k.ANNOTATION_PLATFORM_STRATEGY}={standing_answer(plan.spec)} is the standing "
            f"answer (default_strategy); it must be on the AscendJob when the job is created. At each fault "
            f"ClusterD waits for it (3 s polls, up to 300 s), then asks with {k.ANNOTATION_CONFIRM_FAULT} "
            f"and the control plane answers."
        )
    return tuple(notes)

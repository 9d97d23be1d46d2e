"""``render(manifest, spec)``: one validated policy merged into one AscendJob."""

from __future__ import annotations

from typing import Any

from apps.cluster import constants as k
from apps.policies.spec import PolicySpec
from apps.taskd.manager_script import render_manager_py

from . import artifacts as art
from .configmap import taskd_configmap
from .keys import PolicyKeys, policy_keys, standing_answer
from .manifest import (
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
        effects=_effects(plan, keys, changes, artifacts, _replicas(manifest) != _replicas(merged)),
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
) -> tuple[Effect, ...]:
    set_keys = [f"{key}={value!r}" for key, value in {**keys.labels, **keys.annotations}.items()]
    removed = [*keys.removed_labels, *keys.removed_annotations]
    summary = "PodGroup <job>-<uid> (ClusterD reads it at the next fault): "
    summary += ("sets " + ", ".join(set_keys)) if set_keys else "sets no recovery keys"
    if removed:
        summary += "; removes " + ", ".join(removed)
    effects = [Effect("podgroup", "live", summary)]

    what = [e["name"] for e in desired_env(plan)] + [f"port {p['name']}" for p in desired_ports(plan)]
    if plan.uses_taskd:
        what.append(f"volume {TASKD_VOLUME_NAME} (ConfigMap {plan.configmap_name})")
    if templates_changed or (changes.roles and what):
        change = ", ".join(what) if what else "takes back the env, ports and volumes an earlier policy added"
        effects.append(
            Effect(
                "pod-template",
                "next-pod-creation",
                f"ascend container of {', '.join(changes.roles)}: {change}; running pods keep their old spec "
                f"until they are next created (rescheduling or restart)",
            )
        )
    if plan.needs_agent and plan.framework in (PYTORCH, MINDSPORE):
        effects.append(
            Effect("image", "next-image-build", "rebuild the training image with Dockerfile.snippet")
        )
        effects.append(Effect("launcher", "next-start", "add launcher.sh to the training start script"))
    if artifacts.training_flags:
        effects.append(
            Effect("training-script", "next-start", "training flags/config from training-flags.txt")
        )
    return tuple(effects)


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
            f"{art.TASKD_MOUNT_PATH}."
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

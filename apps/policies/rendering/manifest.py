"""Merging a policy into an AscendJob: metadata keys, runPolicy.backoffLimit and the pod templates.

Only the ``ascend`` container of each replica is touched (mindcluster.md §1.4: it is the container
MindCluster injects into and the one TaskD/MindIO run in). The pod-template part takes effect when
pods are next created; the metadata keys are also patched live on the PodGroup by the push.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from apps.core.jsonmerge import merge_patch_diff
from mindcluster import keys as k

from .entries import ENV, MOUNT, PORT, VOLUME, Entry, format_marker, merge_entries, parse_marker
from .keys import PolicyKeys
from .plan import PYTORCH, RenderPlan

# The taskd-manager ConfigMap is mounted here; the launcher starts manager.py from this directory.
TASKD_VOLUME_NAME = "taskd-manager"
TASKD_MOUNT_PATH = "/opt/mindcluster/taskd"
# Pod-template annotation listing the env/ports/volumes this renderer appended (see entries.py).
OWNERSHIP_ANNOTATION = k.ANNOTATION_MANAGED_KEYS
POD_IP_FIELD = "status.podIP"
_MISSING: Any = object()


def desired_env(plan: RenderPlan) -> list[Entry]:
    """Env of the ascend container, in canonical order (fresh dicts: never shared between replicas)."""
    env: list[Entry] = []
    if plan.needs_agent:
        env.append({"name": k.ENV_POD_IP, "valueFrom": {"fieldRef": {"fieldPath": POD_IP_FIELD}}})
    if plan.process_machinery:
        # TaskD's controller refuses to start MindIO without POD_IP and TTP_PORT (mindcluster.md §10).
        env.append({"name": k.ENV_TTP_PORT, "value": str(plan.spec.ttp_port)})
    if plan.strategies and plan.hand_set_recovery_env:
        # Up to 7.1 these were set by hand (seed 000); from 7.2 the operator appends its own copies
        # without de-duplicating, so rendering them there would duplicate env names.
        env.append({"name": k.ENV_PROCESS_RECOVER, "value": "on"})
        if plan.framework == PYTORCH:
            env.append({"name": k.ENV_ELASTIC_PROCESS_RECOVER_ENABLE, "value": "1"})
        if "recover-in-place" in plan.strategies:
            env.append({"name": k.ENV_ENABLE_RESTART_FAULT_PROCESS, "value": "on"})
    return env


def desired_ports(plan: RenderPlan) -> list[Entry]:
    ports: list[Entry] = []
    if plan.process_machinery:
        ports.append({"containerPort": plan.spec.ttp_port, "name": k.PORT_TTP_NAME})
    if plan.uses_taskd:
        # The TaskD manager listens on 9601 and every pod's proxy dials it (mindcluster.md §5.1).
        ports.append({"containerPort": k.PORT_TASKD[1], "name": k.PORT_TASKD[0]})
    return ports


def desired_volumes(plan: RenderPlan) -> list[Entry]:
    if not plan.uses_taskd:
        return []
    return [{"name": TASKD_VOLUME_NAME, "configMap": {"name": plan.configmap_name}}]


def desired_mounts(plan: RenderPlan) -> list[Entry]:
    if not plan.uses_taskd:
        return []
    return [{"name": TASKD_VOLUME_NAME, "mountPath": TASKD_MOUNT_PATH, "readOnly": True}]


@dataclass
class TemplateChanges:
    """What the merge did to the pod templates, for effects and the job patch."""

    roles: list[str] = field(default_factory=list)
    replica_patches: dict[str, Any] = field(default_factory=dict)


def merge_metadata(manifest: dict[str, Any], keys: PolicyKeys) -> None:
    """Set and remove the owned labels/annotations; every other key stays as the user wrote it."""
    meta = _child(manifest, "metadata")
    labels = _child(meta, "labels")
    annotations = _child(meta, "annotations")
    labels.update(keys.labels)
    annotations.update(keys.annotations)
    for key in keys.removed_labels:
        labels.pop(key, None)
    for key in keys.removed_annotations:
        annotations.pop(key, None)
    # An empty map and a missing one mean the same; dropping it keeps a policy switch exact.
    for name in ("labels", "annotations"):
        if not meta[name]:
            del meta[name]


def merge_backoff_limit(manifest: dict[str, Any], backoff_limit: int | None) -> dict[str, Any] | None:
    """Set runPolicy.backoffLimit, or remove it for "unlimited"; returns the runPolicy merge patch."""
    spec = _child(manifest, "spec")
    had_run_policy = isinstance(spec.get("runPolicy"), dict)
    run_policy = _child(spec, "runPolicy")
    if backoff_limit is None:
        # The operator reads a missing (or <= 0) backoffLimit as unlimited (mindcluster.md §1.2).
        run_policy.pop("backoffLimit", None)
    else:
        run_policy["backoffLimit"] = backoff_limit
    if run_policy:
        return {"backoffLimit": backoff_limit}
    del spec["runPolicy"]
    return None if had_run_policy else {}


def merge_templates(manifest: dict[str, Any], plan: RenderPlan) -> TemplateChanges:
    """Merge env, ports, volumes and mounts into the ascend container of every replica."""
    changes = TemplateChanges()
    replica_specs = (manifest.get("spec") or {}).get("replicaSpecs")
    if not isinstance(replica_specs, dict):
        return changes
    for role, rspec in replica_specs.items():
        patch = _merge_replica(rspec, plan)
        if patch is not None:
            changes.roles.append(str(role))
            changes.replica_patches[role] = patch
    return changes


def _merge_replica(rspec: Any, plan: RenderPlan) -> dict[str, Any] | None:
    template = rspec.get("template") if isinstance(rspec, dict) else None
    if not isinstance(template, dict):
        return None
    pod_spec = template.get("spec")
    if not isinstance(pod_spec, dict):
        return None
    containers = pod_spec.get("containers")
    if not isinstance(containers, list):
        return None
    ascend = next((c for c in containers if isinstance(c, dict) and c.get("name") == k.CONTAINER_NAME), None)
    if ascend is None:
        return None  # the validator reports it; never touch another container
    before_meta = _copy(template.get("metadata", _MISSING))
    annotations = before_meta.get("annotations") if isinstance(before_meta, dict) else None
    owned = parse_marker(annotations.get(OWNERSHIP_ANNOTATION) if isinstance(annotations, dict) else None)
    added: set[str] = set()
    for key, kind, desired in (
        ("env", ENV, desired_env(plan)),
        ("ports", PORT, desired_ports(plan)),
        ("volumeMounts", MOUNT, desired_mounts(plan)),
    ):
        merged, appended = merge_entries(ascend.get(key), desired, kind, owned)
        added |= appended
        _set_or_drop(ascend, key, merged)
    had_volumes = "volumes" in pod_spec
    volumes, appended = merge_entries(pod_spec.get("volumes"), desired_volumes(plan), VOLUME, owned)
    added |= appended
    _set_or_drop(pod_spec, "volumes", volumes)
    _apply_marker(template, added)

    spec_patch: dict[str, Any] = {"containers": _copy(containers)}
    if "volumes" in pod_spec:
        spec_patch["volumes"] = _copy(pod_spec["volumes"])
    elif had_volumes:
        spec_patch["volumes"] = None
    template_patch: dict[str, Any] = {"spec": spec_patch}
    after_meta = template.get("metadata", _MISSING)
    if after_meta != before_meta:
        if after_meta is _MISSING:
            template_patch["metadata"] = None
        elif isinstance(before_meta, dict) and isinstance(after_meta, dict):
            template_patch["metadata"] = merge_patch_diff(before_meta, after_meta)
        else:
            template_patch["metadata"] = _copy(after_meta)
    return {"template": template_patch}


def _apply_marker(template: dict[str, Any], tokens: set[str]) -> None:
    """Record the appended entries on the pod template (or drop the record when there are none)."""
    meta = template.get("metadata")
    if tokens:
        if not isinstance(meta, dict):
            meta = template["metadata"] = {}
        annotations = meta.get("annotations")
        if not isinstance(annotations, dict):
            annotations = meta["annotations"] = {}
        annotations[OWNERSHIP_ANNOTATION] = format_marker(tokens)
        return
    if not isinstance(meta, dict):
        return
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(OWNERSHIP_ANNOTATION, None)
        if not annotations:
            del meta["annotations"]
    # Empty maps mean the same as missing ones; dropping them keeps a policy switch exact.
    if not meta:
        del template["metadata"]


def _set_or_drop(parent: dict[str, Any], key: str, items: list[Any]) -> None:
    if items:
        parent[key] = items
    else:
        parent.pop(key, None)


def _child(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key)
    if not isinstance(value, dict):
        value = {}
        parent[key] = value
    return value


def _copy(value: Any) -> Any:
    """Deep copy of JSON-shaped data (several times faster than copy.deepcopy for manifests)."""
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value


copy_document = _copy

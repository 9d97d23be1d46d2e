"""``validate_manifest``: the structural checks the Ascend operator applies to an AscendJob.

Mirrors ``ascendjob_validate.go`` (mindcluster.md §1.2) plus the Kubernetes naming limits that
bite later, when pods and Services are created from the job name. The operator stops at its first
failure and records a Warning event; here every problem is reported at once, up front.
"""

from __future__ import annotations

import re
from typing import Any

from apps.policies.spec import FRAMEWORKS, npus_in
from mindcluster import keys as k
from mindcluster.operator_validation import MAX_REPLICAS, SUCCESS_POLICIES

from .fields import did_you_mean, is_int
from .issues import Issue, IssueCollector, describe, json_type, key_text, pointer

PREFIX = "manifest:"
RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_MAX_NAME = 63


def where(*parts: str | int) -> str:
    """A JSON pointer into the manifest, prefixed so it cannot be mistaken for a policy field."""
    return PREFIX + pointer(*parts)


def validate_manifest(manifest: Any) -> tuple[Issue, ...]:
    """Everything the AscendJob operator would reject (errors) or that breaks pod creation later."""
    out = IssueCollector()
    try:
        _check(manifest, out)
    except Exception as exc:  # never let a malformed document crash a request or the command
        out.error(
            "internal_error",
            where(),
            f"The manifest validator failed unexpectedly ({type(exc).__name__}); please report it.",
        )
    return tuple(out.issues)


def _check(manifest: Any, out: IssueCollector) -> None:
    if not isinstance(manifest, dict):
        out.error(
            "manifest_not_an_object", where(), f"The manifest must be a mapping, got {json_type(manifest)}."
        )
        return
    if manifest.get("apiVersion") != k.ASCENDJOB_API_VERSION:
        out.error(
            "manifest_wrong_api_version",
            where("apiVersion"),
            f"apiVersion is {describe(manifest.get('apiVersion'))}; the Ascend operator only watches "
            f"{k.ASCENDJOB_API_VERSION}.",
            [k.ASCENDJOB_API_VERSION],
        )
    if manifest.get("kind") != k.ASCENDJOB_KIND:
        out.error(
            "manifest_wrong_kind",
            where("kind"),
            f"kind is {describe(manifest.get('kind'))}; recovery policies apply only to "
            f"{k.ASCENDJOB_KIND} jobs.",
            [k.ASCENDJOB_KIND],
        )
    metadata = manifest.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        out.error(
            "manifest_invalid_type",
            where("metadata"),
            f"metadata must be a mapping, got {json_type(metadata)}.",
        )
    metadata = metadata if isinstance(metadata, dict) else {}
    spec = manifest.get("spec")
    if not isinstance(spec, dict):
        out.error(
            "manifest_missing_replica_specs" if spec is None else "manifest_invalid_type",
            where("spec"),
            f"spec must be a mapping with replicaSpecs, got {json_type(spec)}.",
        )
        spec = {}
    replica_specs = spec.get("replicaSpecs")
    _check_name(metadata.get("name"), replica_specs, out)
    framework = _check_framework(metadata.get("labels"), out)
    _check_scaling_labels(metadata.get("labels"), out)
    _check_success_policy(spec, out)
    _check_replica_specs(replica_specs, framework, "spec" in manifest, out)


def _check_name(name: Any, replica_specs: Any, out: IssueCollector) -> None:
    at = where("metadata", "name")
    if name is None or name == "":
        out.error(
            "manifest_empty_name", at, "metadata.name is empty; Kubernetes needs a name to create the job."
        )
        return
    if not isinstance(name, str):
        out.error("manifest_invalid_type", at, f"metadata.name must be a string, got {json_type(name)}.")
        return
    if len(name) > _MAX_NAME or not _DNS1123_LABEL.match(name):
        out.error(
            "manifest_invalid_name",
            at,
            f"metadata.name {describe(name)} must be at most {_MAX_NAME} lower-case letters, digits or "
            f"'-', starting and ending with a letter or digit, because pod and Service names are built "
            f"from it.",
        )
        return
    if name[0].isdigit():
        out.warn(
            "manifest_name_starts_with_digit",
            at,
            f"metadata.name {describe(name)} starts with a digit; the per-pod Services named after it must "
            f"start with a letter (DNS-1035), so pod creation may fail.",
        )
    longest = _longest_pod_name(name, replica_specs)
    if longest is not None and len(longest) > _MAX_NAME:
        out.error(
            "manifest_name_too_long",
            at,
            f"Pods and Services get names like {describe(longest)} ({len(longest)} characters), over "
            f"Kubernetes' {_MAX_NAME}-character limit; shorten metadata.name.",
        )


def _longest_pod_name(name: str, replica_specs: Any) -> str | None:
    """The longest ``<job>-<role>-<index>`` name the operator will generate (kubeflow naming)."""
    if not isinstance(replica_specs, dict):
        return None
    names = []
    for role, rspec in replica_specs.items():
        replicas = rspec.get("replicas", 1) if isinstance(rspec, dict) else 1
        last = replicas - 1 if is_int(replicas) and 0 < replicas <= MAX_REPLICAS else 0
        names.append(f"{name}-{key_text(role).lower()}-{last}")
    return max(names, key=len, default=None)


def _check_framework(labels: Any, out: IssueCollector) -> str | None:
    labels = labels if isinstance(labels, dict) else {}
    at = where("metadata", "labels", k.LABEL_FRAMEWORK)
    if k.LABEL_FRAMEWORK not in labels:
        out.error(
            "manifest_missing_framework",
            at,
            f"The {k.LABEL_FRAMEWORK} label is required; the operator refuses jobs without it.",
            list(FRAMEWORKS),
        )
        return None
    value = labels[k.LABEL_FRAMEWORK]
    if value not in FRAMEWORKS:
        out.error(
            "manifest_invalid_framework",
            at,
            f"The {k.LABEL_FRAMEWORK} label is {describe(value)}; the operator accepts only "
            f"{', '.join(FRAMEWORKS)}.{did_you_mean(value, FRAMEWORKS)}",
            list(FRAMEWORKS),
        )
        return None
    return str(value)


def _check_scaling_labels(labels: Any, out: IssueCollector) -> None:
    """Elastic-scaling and 910A5 scale-out labels, which the operator checks before anything else."""
    labels = labels if isinstance(labels, dict) else {}
    if k.LABEL_SCALING_RULE in labels:
        for key in (k.LABEL_SCALING_GROUP, k.LABEL_SCALING_JOB_ID):
            if key not in labels:
                out.error(
                    "manifest_scaling_label_missing",
                    where("metadata", "labels", key),
                    f"The {k.LABEL_SCALING_RULE} label makes this an elastic-scaling job, which also needs "
                    f"the {key} label; the operator fails the job otherwise.",
                )
    value = labels.get(k.LABEL_SCALE_OUT_TYPE)
    text = value.upper() if isinstance(value, str) else value
    if (
        text is not None
        and text not in k.SCALE_OUT_TYPES
        and not (isinstance(text, str) and not text.strip())
    ):
        out.error(
            "manifest_invalid_scale_out_type",
            where("metadata", "labels", k.LABEL_SCALE_OUT_TYPE),
            f"The {k.LABEL_SCALE_OUT_TYPE} label is {describe(value)}; from MindCluster 26.0 the operator "
            f"accepts only {' or '.join(k.SCALE_OUT_TYPES)} (any case) and otherwise fails the job without "
            f"a Warning Event.{did_you_mean(text, k.SCALE_OUT_TYPES)}",
            list(k.SCALE_OUT_TYPES),
        )


def _check_success_policy(spec: dict[str, Any], out: IssueCollector) -> None:
    policy = spec.get("successPolicy")
    if policy is not None and policy not in SUCCESS_POLICIES:
        out.error(
            "manifest_invalid_success_policy",
            where("spec", "successPolicy"),
            f'successPolicy {describe(policy)} is not allowed; the operator accepts only "" or "AllWorkers".',
            list(SUCCESS_POLICIES),
        )


def _check_replica_specs(
    replica_specs: Any, framework: str | None, has_spec: bool, out: IssueCollector
) -> None:
    at = where("spec", "replicaSpecs")
    if replica_specs is None:
        if has_spec:
            out.error(
                "manifest_missing_replica_specs",
                at,
                "spec.replicaSpecs is not set; the operator needs at least one replica type.",
            )
        return
    if not isinstance(replica_specs, dict):
        out.error(
            "manifest_invalid_type", at, f"replicaSpecs must be a mapping, got {json_type(replica_specs)}."
        )
        return
    leader = k.LEADER_ROLE.get(framework) if framework else None
    for role, rspec in replica_specs.items():
        role_text = key_text(role)
        if leader is not None and role not in (leader, k.WORKER_ROLE):
            out.error(
                "manifest_invalid_replica_type",
                where("spec", "replicaSpecs", role_text),
                f"Replica type {describe(role)} is not allowed for {framework}; use {leader} and "
                f"{k.WORKER_ROLE}.{did_you_mean(role, (leader, k.WORKER_ROLE))}",
                [leader, k.WORKER_ROLE],
            )
        _check_replica(role_text, rspec, out)
    if framework is None:
        return
    if not any(role != k.WORKER_ROLE for role in replica_specs):
        _check_leaderless(framework, replica_specs, out)


def _check_leaderless(framework: str, replica_specs: dict[Any, Any], out: IssueCollector) -> None:
    leader = k.LEADER_ROLE[framework]
    at = where("spec", "replicaSpecs")
    if framework != "mindspore":
        out.error(
            "manifest_missing_leader",
            at,
            f"A {framework} job needs exactly one {leader} replica; the operator rejects it otherwise.",
            [leader, k.WORKER_ROLE],
        )
        return
    total = _worker_npus(replica_specs.get(k.WORKER_ROLE))
    if total > 1:
        out.error(
            "manifest_missing_leader",
            at,
            f"A MindSpore job without a {leader} may ask for only 1 NPU in total, but the workers ask for "
            f"{total}; add a {leader} replica.",
            [leader, k.WORKER_ROLE],
        )


def _worker_npus(rspec: Any) -> int:
    """NPUs of the Worker replicas' ascend container times replicas, as the operator counts them."""
    if not isinstance(rspec, dict):
        return 0
    replicas = rspec.get("replicas", 1)
    replicas = replicas if is_int(replicas) else 1
    for container in _containers(rspec) or []:
        if isinstance(container, dict) and container.get("name") == k.CONTAINER_NAME:
            return npus_in(container.get("resources")) * replicas
    return 0


def _containers(rspec: dict[str, Any]) -> list[Any] | None:
    template = rspec.get("template")
    pod_spec = template.get("spec") if isinstance(template, dict) else None
    containers = pod_spec.get("containers") if isinstance(pod_spec, dict) else None
    return containers if isinstance(containers, list) else None


def _check_replica(role: str, rspec: Any, out: IssueCollector) -> None:
    base = ("spec", "replicaSpecs", role)
    if not isinstance(rspec, dict):
        out.error(
            "manifest_invalid_type",
            where(*base),
            f"replicaSpecs.{role} must be a mapping, got {json_type(rspec)}.",
        )
        return
    replicas = rspec.get("replicas")
    if replicas is not None:
        if not is_int(replicas):
            out.error(
                "manifest_invalid_type",
                where(*base, "replicas"),
                f"replicas must be an integer, got {json_type(replicas)}.",
                [0, MAX_REPLICAS],
            )
        elif not 0 <= replicas <= MAX_REPLICAS:
            out.error(
                "manifest_replicas_out_of_range",
                where(*base, "replicas"),
                f"replicas is {describe(replicas)}; the operator accepts 0 to {MAX_REPLICAS}.",
                [0, MAX_REPLICAS],
            )
        elif role != k.WORKER_ROLE and replicas != 1:
            out.error(
                "manifest_leader_replicas",
                where(*base, "replicas"),
                f"{role} is the leader replica and must have exactly 1 replica, not {replicas}.",
                [1],
            )
    restart = rspec.get("restartPolicy")
    if restart not in (None, "", *RESTART_POLICIES):
        out.error(
            "manifest_invalid_restart_policy",
            where(*base, "restartPolicy"),
            f"restartPolicy {describe(restart)} is not one of {', '.join(RESTART_POLICIES)}."
            f"{did_you_mean(restart, RESTART_POLICIES)}",
            list(RESTART_POLICIES),
        )
    _check_containers(base, rspec, out)


def _check_containers(base: tuple[str, ...], rspec: dict[str, Any], out: IssueCollector) -> None:
    containers = _containers(rspec)
    if not containers:
        out.error(
            "manifest_missing_containers",
            where(*base, "template", "spec", "containers"),
            f"{base[-1]} has no containers in its pod template; the operator rejects the job.",
        )
        return
    found = False
    for index, container in enumerate(containers):
        if not isinstance(container, dict) or container.get("name") != k.CONTAINER_NAME:
            continue
        found = True
        image = container.get("image")
        if not isinstance(image, str) or not image.strip():
            out.error(
                "manifest_empty_image",
                where(*base, "template", "spec", "containers", index, "image"),
                f"The {k.CONTAINER_NAME} container of {base[-1]} has no image.",
            )
    if not found:
        names = [c.get("name") for c in containers if isinstance(c, dict)]
        hint = f" (found {describe(names)})" if names else ""
        out.error(
            "manifest_missing_ascend_container",
            where(*base, "template", "spec", "containers"),
            f'{base[-1]} needs a container named exactly "{k.CONTAINER_NAME}"{hint}; the operator injects '
            f"NPU and recovery settings only into that container.",
            [k.CONTAINER_NAME],
        )

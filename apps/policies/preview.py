"""Dry run of a policy on a job: validate, render against the live object, and diff. Writes nothing.

When the cluster cannot be reached the render falls back to a skeleton built from the stored job
facts, and the answer says so in ``live`` instead of failing: a preview is useful offline too.

The live object is read with the control plane's own cluster-wide account, so what a preview shows
is limited by the caller's role (``redact_for_viewer``): an editor may change the job and sees it
whole; a viewer sees the policy's effect but not the values the job's owner put into it.
"""

from __future__ import annotations

import logging
from typing import Any

from apps.cluster import client as kube
from apps.cluster.errors import ClusterError
from apps.jobs.clusters import cluster_ref
from apps.jobs.models import TrainingJob
from apps.policies.desired import DesiredState, ascendjob_patch, desired_state, podgroup_patch
from apps.policies.rendering import RenderResult
from apps.policies.services import policy_validate_for_job
from mindcluster import keys as c

log = logging.getLogger(__name__)


def with_release(raw_spec: Any, release: str | None) -> Any:
    """A spec that names no release targets ``release`` (presets are release-agnostic on purpose)."""
    if isinstance(raw_spec, dict) and "mindcluster_version" not in raw_spec and release:
        return {**raw_spec, "mindcluster_version": release}
    return raw_spec


def skeleton_manifest(job: TrainingJob) -> dict[str, Any]:
    """An AscendJob with only what the control plane knows about ``job`` (used when the cluster is away)."""
    resources = {"requests": {"huawei.com/Ascend910": job.npus_per_pod}} if job.npus_per_pod else {}
    return {
        "apiVersion": c.ASCENDJOB_API_VERSION,
        "kind": c.ASCENDJOB_KIND,
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "labels": {c.LABEL_FRAMEWORK: job.framework},
        },
        "spec": {
            "replicaSpecs": {
                role: {
                    "replicas": int(count),
                    "template": {
                        "spec": {"containers": [{"name": c.CONTAINER_NAME, "resources": resources}]}
                    },
                }
                for role, count in job.replicas.items()
            }
        },
    }


def render_output(rendered: RenderResult) -> dict[str, Any]:
    """The JSON form of a render shared by preview and ``/render/``."""
    return {
        "manifest": rendered.manifest,
        "labels": rendered.labels,
        "annotations": rendered.annotations,
        "removed_labels": list(rendered.removed_labels),
        "removed_annotations": list(rendered.removed_annotations),
        "job_patch": rendered.job_patch,
        "podgroup_patch": rendered.podgroup_patch,
        "configmap": rendered.configmap,
        "artifacts": rendered.artifacts.files(),
        "effects": [effect.to_dict() for effect in rendered.effects],
        "notes": list(rendered.notes),
    }


def _read_live(job: TrainingJob) -> tuple[dict[str, Any] | None, dict[str, Any] | None, dict[str, Any]]:
    ref = cluster_ref(job.cluster)
    try:
        live = kube.get_ascendjob(ref, job.namespace, job.name)
    except ClusterError as exc:
        reason = "not_found" if exc.not_found else "unreachable"
        return None, None, {"available": False, "reason": reason, "message": exc.message}
    meta = live.get("metadata") or {}
    info: dict[str, Any] = {"available": True, "resource_version": str(meta.get("resourceVersion", ""))}
    podgroup = None
    uid = str(meta.get("uid") or job.uid or "")
    if uid:
        try:
            podgroup = kube.get_podgroup(ref, job.namespace, kube.podgroup_name(job.name, uid))
        except ClusterError as exc:
            info["podgroup"] = "absent" if exc.not_found else f"unreadable: {exc.message}"
    return live, podgroup, info


def _diff(live: dict[str, Any], podgroup: dict[str, Any] | None, state: DesiredState) -> dict[str, Any]:
    """What the push would write: the same patches (``desired.diff``), without the preconditions."""
    return {
        "ascendjob": ascendjob_patch(live, state),
        "podgroup": podgroup_patch(podgroup, state) if podgroup is not None else None,
    }


# What the policy itself renders into the ``ascend`` container (manifest.py ``desired_env``): values a
# viewer can derive from the policy anyway, and the point of the preview. Every other env value is
# the job owner's (API keys, passwords, endpoints) and is hidden from viewers.
POLICY_ENV = frozenset(
    {
        c.ENV_POD_IP,
        c.ENV_TTP_PORT,
        c.ENV_PROCESS_RECOVER,
        c.ENV_ELASTIC_PROCESS_RECOVER_ENABLE,
        c.ENV_ENABLE_RESTART_FAULT_PROCESS,
        c.ENV_TASKD_PROCESS_ENABLE,
    }
)
HIDDEN = "(hidden)"
# kubectl's copy of the whole applied object, env values included.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def redact_for_viewer(value: Any) -> Any:
    """A copy of ``value`` (any part of a preview answer) with what a viewer may not read removed.

    - ``managedFields`` (who wrote which field, with field sets) and kubectl's last-applied copy are
      dropped wherever they appear;
    - an env entry keeps its name; its ``value`` / ``valueFrom`` becomes ``"(hidden)"``, except for
      the variables the policy renders (``POLICY_ENV``).
    Labels, annotations the policy owns, ports, images, replica counts and the rendered artifacts
    stay: they are what the job page already shows a viewer, and what the policy changes.
    """
    if isinstance(value, list):
        return [redact_for_viewer(item) for item in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key == "managedFields" or key == LAST_APPLIED:
            continue
        if key == "env" and isinstance(item, list):
            out[key] = [_redact_env(entry) for entry in item]
        else:
            out[key] = redact_for_viewer(item)
    return out


def _redact_env(entry: Any) -> Any:
    if not isinstance(entry, dict) or entry.get("name") in POLICY_ENV:
        return entry
    hidden = {"name": entry.get("name")}
    for key in ("value", "valueFrom"):
        if key in entry:
            hidden[key] = HIDDEN
    return hidden


def policy_preview(*, job: TrainingJob, raw_spec: Any | None, redact: bool = False) -> dict[str, Any]:
    """Validate ``raw_spec`` (None = current revision) for ``job``, render it, diff it with the cluster.

    ``redact``: the caller only views the job (see ``redact_for_viewer``).
    """
    answer = _preview(job=job, raw_spec=raw_spec)
    if redact:
        answer = redact_for_viewer(answer)
    answer["redacted"] = redact
    return answer


def _preview(*, job: TrainingJob, raw_spec: Any | None) -> dict[str, Any]:
    current = job.current_revision
    # The revision the push would stamp: the current one, or the next for a draft.
    revision = (current.number if current is not None else 0) + (0 if raw_spec is None else 1)
    if raw_spec is None:
        raw_spec = current.spec if current is not None else {}
    result = policy_validate_for_job(job=job, spec=with_release(raw_spec, job.mindcluster_version))
    answer: dict[str, Any] = result.to_dict()
    answer.update({"render": None, "diff": None})
    live, podgroup, answer["live"] = _read_live(job)
    if not result.ok or result.spec is None:
        return answer
    manifest = live if live is not None else skeleton_manifest(job)
    try:
        state = desired_state(manifest, result.spec, revision)
    except Exception as exc:  # the live object may be shaped in ways rendering has not seen; say so
        log.exception("preview render failed for job %s", job.pk)
        answer["render_error"] = f"rendering failed on this manifest ({type(exc).__name__})"
        return answer
    answer["render"] = render_output(state.rendered)
    answer["revision"] = revision
    answer["keys"] = [key.as_dict() for key in state.keys]  # each key with when it takes effect
    if live is not None:
        answer["diff"] = _diff(live, podgroup, state)
    return answer

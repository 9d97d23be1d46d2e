"""A desired state against the live objects: the patches a push writes, the diff a preview shows,
the drift a sweep reports. Pure: live objects in, dicts out; the I/O is the caller's.

Push, preview and drift all compare through these functions, so "what would change" means the
same thing on the page, in the worker and in the drift sweep.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apps.core.jsonmerge import merge_patch_diff
from mindcluster import keys as c

from .state import REVISION_ANNOTATION, DesiredState, PodGroupKeys


def same_value(section: str, key: str, live: dict[str, Any], desired: str | None) -> bool:
    # Platform mode is switched on by the *presence* of ProcessRecoverStrategy; on the PodGroup its
    # value belongs to the decider (the standing answer, or its answer during a fault) and must never
    # be reset by a push. The push writes the standing answer only where the key is missing.
    if section == "annotations" and key == c.ANNOTATION_PLATFORM_STRATEGY and desired is not None:
        return key in live
    return live.get(key) == desired


def key_differences(live_meta: dict[str, Any], desired: PodGroupKeys) -> dict[str, Any]:
    """Merge patch of only the owned keys whose live value differs from the desired one."""
    patch: dict[str, Any] = {}
    for section in ("labels", "annotations"):
        live_section = live_meta.get(section) or {}
        changed = {
            key: value
            for key, value in desired[section].items()
            if not same_value(section, key, live_section, value)
        }
        if changed:
            patch[section] = changed
    return patch


def _meta_subset(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {"labels": dict(meta.get("labels") or {}), "annotations": dict(meta.get("annotations") or {})}


def ascendjob_patch(live: dict[str, Any], state: DesiredState) -> dict[str, Any]:
    """Merge patch taking the live AscendJob to ``state``: metadata keys and spec; {} when it is there."""
    patch = {
        "metadata": merge_patch_diff(_meta_subset(live), _meta_subset(state.manifest)),
        "spec": merge_patch_diff(live.get("spec") or {}, state.manifest.get("spec") or {}),
    }
    return {key: value for key, value in patch.items() if value}


def podgroup_patch(live: dict[str, Any], state: DesiredState) -> dict[str, Any]:
    """Merge patch of the PodGroup's metadata (labels/annotations); {} when it holds ``state``."""
    return key_differences(live.get("metadata") or {}, state.podgroup)


def configmap_is_ours(live: dict[str, Any]) -> bool:
    """Created by a push (so a revision that needs no TaskD manager may delete it)."""
    labels = (live.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(c.MANAGED_BY_LABEL) == c.MANAGED_BY_VALUE)


def configmap_current(live: dict[str, Any], desired: dict[str, Any]) -> bool:
    """The live ConfigMap already holds the desired data, our labels and the revision."""
    live_meta = live.get("metadata") or {}
    want_meta = desired.get("metadata") or {}
    live_labels = live_meta.get("labels") or {}
    return (
        (live.get("data") or {}) == (desired.get("data") or {})
        and (live_meta.get("annotations") or {}).get(REVISION_ANNOTATION)
        == (want_meta.get("annotations") or {}).get(REVISION_ANNOTATION)
        and all(live_labels.get(k) == v for k, v in (want_meta.get("labels") or {}).items())
    )


def configmap_replacement(live: dict[str, Any], desired: dict[str, Any]) -> dict[str, Any]:
    """The body that replaces ``live``: our data, labels and revision; others' labels/annotations kept."""
    live_meta = live.get("metadata") or {}
    want_meta = desired.get("metadata") or {}
    meta = {
        **want_meta,
        "labels": {**(live_meta.get("labels") or {}), **(want_meta.get("labels") or {})},
        "annotations": {**(live_meta.get("annotations") or {}), **(want_meta.get("annotations") or {})},
        "resourceVersion": live_meta.get("resourceVersion"),
    }
    return {**desired, "metadata": meta}


@dataclass(frozen=True)
class Drift:
    """One policy-owned key whose live value differs from the current revision."""

    object: str
    key: str
    live: Any
    desired: Any

    def as_dict(self) -> dict[str, Any]:
        return {"object": self.object, "key": self.key, "live": self.live, "desired": self.desired}


def drift(live_job: dict[str, Any], podgroup: dict[str, Any] | None, state: DesiredState) -> list[Drift]:
    """Policy-owned keys of the live AscendJob (and PodGroup, once it exists) that differ from ``state``.

    The revision annotation is bookkeeping, not behaviour: it is never drift.
    """
    found: list[Drift] = []
    live_meta = live_job.get("metadata") or {}
    for section in ("labels", "annotations"):
        live_values = live_meta.get(section) or {}
        wanted = sorted(
            (item.key, item.value)
            for item in state.keys
            if item.object == "AscendJob" and item.section == section
        )
        for key, value in wanted:
            if live_values.get(key) != value:
                found.append(Drift("AscendJob", f"metadata.{section}.{key}", live_values.get(key), value))
    if (live_job.get("spec") or {}) != (state.manifest.get("spec") or {}):
        found.append(Drift("AscendJob", "spec.replicaSpecs (env, ports, volumes)", "differs", "rendered"))
    if podgroup is None:
        return found  # not scheduled yet: the operator will copy the job's (checked) keys
    pg_meta = podgroup.get("metadata") or {}
    for section in ("labels", "annotations"):
        live_values = pg_meta.get(section) or {}
        for key, value in sorted(state.podgroup[section].items()):
            if key == REVISION_ANNOTATION:
                continue
            if not same_value(section, key, live_values, value):
                found.append(Drift("PodGroup", f"metadata.{section}.{key}", live_values.get(key), value))
    return found

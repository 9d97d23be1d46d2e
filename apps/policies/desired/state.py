"""``desired_state``: everything one revision of a policy wants a job's objects to hold.

The only place that renders a policy for the cluster and stamps the revision: the AscendJob
manifest, the PodGroup keys, the ``taskd-manager`` ConfigMap, each recovery key with *when* it
takes effect (``rendering.when``), and the creation config. Push, drift, preview, admission,
recreate and the render tools read it; none of them renders or stamps on its own.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from apps.policies.rendering import RenderResult, render
from apps.policies.rendering.when import BACKOFF_LIMIT_KEY, When, key_when
from apps.policies.spec import PolicySpec
from mindcluster import keys as c

from .config import Config, config_of_keys

# Policy-owned PodGroup keys by section (labels, annotations): the value to set, or None to remove.
PodGroupKeys = dict[str, dict[str, str | None]]
REVISION_ANNOTATION = c.ANNOTATION_POLICY_REVISION


@dataclass(frozen=True)
class DesiredKey:
    """One key a revision sets (value) or removes (None), and when that takes effect."""

    object: str  # AscendJob, PodGroup
    section: str  # labels, annotations, spec
    key: str
    value: str | None
    when: When

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)  # the five fields, all strings or None


@dataclass(frozen=True)
class DesiredState:
    """What ``revision`` of a policy wants, for one live (or skeleton) AscendJob.

    ``revision`` None: a render that belongs to no revision (the ``/render/`` tool, a draft), so
    nothing is stamped. ``keys`` are the recovery keys (behaviour); the revision annotation is
    bookkeeping and appears only on the objects (``manifest``, ``podgroup``, ``configmap``).
    """

    revision: int | None
    rendered: RenderResult
    keys: tuple[DesiredKey, ...]
    creation_config: Config
    podgroup: PodGroupKeys
    configmap: dict[str, Any] | None  # the whole object; None: the job needs no taskd-manager
    configmap_name: str  # where it lives (also when None: a stale one of ours is deleted)

    @property
    def manifest(self) -> dict[str, Any]:
        """The AscendJob with the policy merged in (and stamped with the revision)."""
        return self.rendered.manifest

    @property
    def stamp(self) -> str | None:
        return None if self.revision is None else str(self.revision)


def desired_state(manifest: dict[str, Any], spec: PolicySpec, revision: int | None = None) -> DesiredState:
    """Render ``spec`` into ``manifest`` (stamped with ``revision``) and say when each key takes effect."""
    rendered = render(manifest, spec)
    stamp = None if revision is None else str(revision)
    if stamp is not None:
        meta = rendered.manifest.setdefault("metadata", {})
        meta.setdefault("annotations", {})[REVISION_ANNOTATION] = stamp
    keys: list[DesiredKey] = []
    for section, values, removed in (
        ("labels", rendered.labels, rendered.removed_labels),
        ("annotations", rendered.annotations, rendered.removed_annotations),
    ):
        for key, value in [*values.items(), *((key, None) for key in removed)]:
            keys.append(DesiredKey("AscendJob", section, key, value, key_when(section, key)))
    backoff = None if spec.backoff_limit is None else str(spec.backoff_limit)
    keys.append(
        DesiredKey("AscendJob", "spec", BACKOFF_LIMIT_KEY, backoff, key_when("spec", BACKOFF_LIMIT_KEY))
    )
    name = str((rendered.manifest.get("metadata") or {}).get("name") or "")
    return DesiredState(
        revision=revision,
        rendered=rendered,
        keys=tuple(keys),
        creation_config=config_of_keys(rendered.labels, rendered.annotations, spec),
        podgroup=_podgroup_keys(rendered, stamp),
        configmap=_configmap(rendered, stamp),
        configmap_name=f"{c.TASKD_MANAGER_CONFIGMAP_PREFIX}{name}",
    )


def _podgroup_keys(rendered: RenderResult, stamp: str | None) -> PodGroupKeys:
    """The keys the push patches live on the PodGroup (the operator copied them there at creation)."""
    meta = rendered.podgroup_patch.get("metadata", {})
    labels: dict[str, str | None] = dict(meta.get("labels") or {})
    annotations: dict[str, str | None] = dict(meta.get("annotations") or {})
    if stamp is not None:
        annotations[REVISION_ANNOTATION] = stamp
    return {"labels": labels, "annotations": annotations}


def _configmap(rendered: RenderResult, stamp: str | None) -> dict[str, Any] | None:
    if rendered.configmap is None:
        return None
    source = rendered.configmap
    meta = dict(source.get("metadata") or {})
    meta["labels"] = dict(meta.get("labels") or {})
    if stamp is not None:
        meta["annotations"] = {**(meta.get("annotations") or {}), REVISION_ANNOTATION: stamp}
    return {**source, "metadata": meta, "data": dict(source.get("data") or {})}

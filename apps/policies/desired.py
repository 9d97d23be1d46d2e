"""The desired state of a job for one revision, with when each part takes effect.

One function, ``desired_state``, is what push, drift, preview and the in-effect view read: the
rendered manifest (stamped with the revision), the recovery keys with their ``when`` (``rendering.when``),
and the *creation config* — the values the operator and ClusterD read once, at creation — that the
in-effect view compares with what the cluster was created with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apps.core.jsonmerge import merge_patch_diff
from apps.policies.rendering import RenderResult, render
from apps.policies.rendering.keys import policy_keys
from apps.policies.rendering.plan import RenderPlan
from apps.policies.rendering.when import BACKOFF_LIMIT_KEY, PLATFORM_MODE_KEY, TARGET_WHEN, When, key_when
from apps.policies.spec import STRATEGY_PRIORITY, PolicySpec
from mindcluster import keys as c

# The creation config: what ClusterD snapshots at Init plus what the operator reads at creation.
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


@dataclass(frozen=True)
class DesiredKey:
    """One key a revision sets (value) or removes (None), and when that takes effect."""

    object: str  # AscendJob, PodGroup
    section: str  # labels, annotations, spec
    key: str
    value: str | None
    when: When

    def as_dict(self) -> dict[str, Any]:
        return {
            "object": self.object,
            "section": self.section,
            "key": self.key,
            "value": self.value,
            "when": self.when,
        }


@dataclass(frozen=True)
class DesiredState:
    revision: int | None
    rendered: RenderResult
    keys: tuple[DesiredKey, ...]
    creation_config: Config

    @property
    def manifest(self) -> dict[str, Any]:
        return self.rendered.manifest


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


def desired_state(manifest: dict[str, Any], spec: PolicySpec, revision: int | None = None) -> DesiredState:
    """Render ``spec`` into ``manifest`` (stamped with ``revision``) and say when each key takes effect."""
    rendered = render(manifest, spec)
    if revision is not None:
        meta = rendered.manifest.setdefault("metadata", {})
        meta.setdefault("annotations", {})[c.ANNOTATION_POLICY_REVISION] = str(revision)
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
    config = _config(rendered.labels, rendered.annotations, spec)
    return DesiredState(revision=revision, rendered=rendered, keys=tuple(keys), creation_config=config)


def _config(labels: dict[str, str], annotations: dict[str, str], spec: PolicySpec) -> Config:
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
    return _config(keys.labels, keys.annotations, spec)


def config_changes(before: Config, after: Config) -> list[str]:
    """Creation-config keys whose value differs (UI names: platform mode is named for what it is)."""
    return [
        PLATFORM_MODE_KEY if key == PLATFORM_MODE else key
        for key in CONFIG_KEYS
        if before.get(key) != after.get(key)
    ]


def live_changes(before: DesiredState | None, after: DesiredState) -> list[str]:
    """Keys read at every fault whose desired value differs between two states."""
    old = {(k.section, k.key): k.value for k in before.keys} if before else {}
    changed = []
    for item in after.keys:
        if item.key == c.ANNOTATION_PLATFORM_STRATEGY:
            if item.value and old.get((item.section, item.key)) not in (None, item.value):
                changed.append(item.key)  # the standing answer of a job already in platform mode
            continue
        if item.when == "live" and old.get((item.section, item.key)) != item.value:
            changed.append(item.key)
    return changed


def artifact_changes(before: DesiredState | None, after: DesiredState) -> dict[When, list[str]]:
    """Pod-template and artifact parts that differ, grouped by when they take effect."""
    found: dict[When, list[str]] = {}

    def add(target: str, name: str) -> None:
        found.setdefault(TARGET_WHEN[target], []).append(name)

    old_spec = (before.manifest.get("spec") or {}) if before else {}
    if merge_patch_diff(old_spec, after.manifest.get("spec") or {}):
        replicas = [
            k for k in merge_patch_diff(old_spec, after.manifest.get("spec") or {}) if k != "runPolicy"
        ]
        if replicas:
            add("pod-template", "env, ports and volumes of the ascend container")
    old_files = before.rendered.artifacts.files() if before else {}
    new_files = after.rendered.artifacts.files()
    for name, target in (
        ("Dockerfile.snippet", "image"),
        ("launcher.sh", "launcher"),
        ("training-flags.txt", "training-script"),
        ("manager.py", "configmap"),
    ):
        if old_files.get(name) != new_files.get(name):
            add(target, name)
    return found

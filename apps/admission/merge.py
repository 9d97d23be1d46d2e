"""What a new AscendJob gets at admission: namespace default, then preset, then the job's own keys.

The job's own recovery keys always win (design §4.5): they are read back into the spec, so the
revision recorded for the job is what it really runs with, and every key where the job overrode
the default or preset is reported as a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from apps.policies.rendering.keys import owned_keys
from apps.policies.spec import RELEASES
from mindcluster import keys as c

ANNOTATION_PRESET = "recovery.mindcluster.io/preset"


def _as_int(value: Any) -> Any:
    try:
        return int(str(value))
    except ValueError:
        return value  # left for the validator to name


def explicit_keys(manifest: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """Spec fields the user set on the job itself: field -> (the key as the user wrote it, value).

    Only keys that are present count; a missing label means "no opinion", not "off".
    """
    meta = manifest.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    found: dict[str, tuple[str, Any]] = {}
    if c.ANNOTATION_RECOVER_STRATEGY in annotations:
        raw = str(annotations[c.ANNOTATION_RECOVER_STRATEGY])
        found["strategies"] = (c.ANNOTATION_RECOVER_STRATEGY, [s for s in raw.split(",") if s])
    if c.LABEL_FAULT_SCHEDULING in labels:
        value = labels[c.LABEL_FAULT_SCHEDULING]
        found["fault_scheduling"] = (
            c.LABEL_FAULT_SCHEDULING,
            value if value in ("grace", "force") else "off",
        )
    if c.LABEL_POD_RESCHEDULING in labels:
        found["pod_rescheduling"] = (c.LABEL_POD_RESCHEDULING, labels[c.LABEL_POD_RESCHEDULING] == "on")
    if c.LABEL_FAULT_RETRY_TIMES in labels:
        found["fault_retry_times"] = (c.LABEL_FAULT_RETRY_TIMES, _as_int(labels[c.LABEL_FAULT_RETRY_TIMES]))
    if c.LABEL_SUB_HEALTHY_STRATEGY in labels:
        found["sub_healthy_strategy"] = (c.LABEL_SUB_HEALTHY_STRATEGY, labels[c.LABEL_SUB_HEALTHY_STRATEGY])
    if c.ANNOTATION_WAIT_RESCHEDULE_TIMEOUT in annotations:
        found["wait_reschedule_timeout"] = (
            c.ANNOTATION_WAIT_RESCHEDULE_TIMEOUT,
            _as_int(annotations[c.ANNOTATION_WAIT_RESCHEDULE_TIMEOUT]),
        )
    backoff = ((manifest.get("spec") or {}).get("runPolicy") or {}).get("backoffLimit")
    if isinstance(backoff, int) and not isinstance(backoff, bool) and backoff > 0:
        found["backoff_limit"] = ("spec.runPolicy.backoffLimit", backoff)
    return found


def declared_release(manifest: dict[str, Any]) -> str | None:
    meta = manifest.get("metadata") or {}
    raw = (meta.get("labels") or {}).get(c.LABEL_RELEASE) or (meta.get("annotations") or {}).get(
        c.ANNOTATION_RELEASE
    )
    return str(raw) if raw and str(raw) in RELEASES else None


@dataclass
class Merged:
    spec: dict[str, Any]
    sources: list[str] = field(default_factory=list)  # "namespace default r3", "preset retry-first"
    overridden: list[str] = field(default_factory=list)  # warnings: the job's own key won


def merge_layers(
    manifest: dict[str, Any], default: dict[str, Any] | None, preset: tuple[str, dict[str, Any]] | None
) -> Merged:
    """Default, then preset (top-level keys replace), then the job's own keys, then its release."""
    spec: dict[str, Any] = dict(default or {})
    merged = Merged(spec=spec)
    if preset is not None:
        spec.update(preset[1])
    for name, (key, value) in explicit_keys(manifest).items():
        if name in spec and spec[name] != value:
            merged.overridden.append(
                f"{key}: the job sets {_shown(value)}, the default/preset says {_shown(spec[name])}; "
                "the job's own value is kept"
            )
        spec[name] = value
    release = declared_release(manifest)
    if release is not None:
        spec["mindcluster_version"] = release
    return merged


def _shown(value: Any) -> str:
    return ",".join(value) if isinstance(value, list) else repr(value)


def keep_user_metadata(original: dict[str, Any], rendered: dict[str, Any]) -> list[str]:
    """Put back every owned label/annotation the user set that rendering changed or removed.

    Rendering owns these keys (it sets or removes them to match the spec); at admission the user's
    explicit value must survive, e.g. a hand-set ``process-recover-enable`` on a 7.2+ job.
    """
    notes: list[str] = []
    owned_labels, owned_annotations = owned_keys()
    for section, owned in (("labels", owned_labels), ("annotations", owned_annotations)):
        mine = (original.get("metadata") or {}).get(section) or {}
        meta = rendered.setdefault("metadata", {})
        for key in sorted(owned & mine.keys()):
            target = meta.setdefault(section, {})
            if target.get(key) != mine[key]:
                notes.append(f"{key}: kept the job's own value {mine[key]!r}")
                target[key] = mine[key]
    return notes

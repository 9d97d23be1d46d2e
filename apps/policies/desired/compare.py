"""Two desired states side by side: what a newer revision changes, grouped by when it takes effect."""

from __future__ import annotations

from apps.core.jsonmerge import merge_patch_diff
from apps.policies.rendering.when import TARGET_WHEN, When
from mindcluster import keys as c

from .state import DesiredState


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
    replicas = [k for k in merge_patch_diff(old_spec, after.manifest.get("spec") or {}) if k != "runPolicy"]
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

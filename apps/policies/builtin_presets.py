"""Built-in policy presets, shipped as data so ``render_policy --preset`` works without a database.

Each value is a policy spec in the JSON shape of design.md §4.1 and goes through ``validate_policy``
like any user policy. ``mindcluster_version`` is left out on purpose: a preset fits any release that
has its strategies, and the command takes the release from the job when the job declares one.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

BUILTIN_PRESETS: dict[str, dict[str, Any]] = {
    # Fastest first: online repair of memory/network faults, then migrate the faulty pod, then a
    # dying-gasp checkpoint before the job is rescheduled.
    "retry-first": {"strategies": ["retry", "recover", "dump"], "fault_scheduling": "grace"},
    # Process-level rescheduling only (seed 000, way one).
    "process-recover": {"strategies": ["recover"], "fault_scheduling": "grace"},
    # Restart only the faulty processes where possible, migrate otherwise (seed 000, way two).
    "in-place": {"strategies": ["recover-in-place", "recover"], "fault_scheduling": "grace"},
    # Dying-gasp checkpoint, then Job-level rescheduling (seed 002).
    "dying-gasp": {"strategies": ["dump"], "fault_scheduling": "grace"},
    # Scale in by DP when no spare node exists (PyTorch, MindCluster 7.2+).
    "elastic": {"strategies": ["elastic-training", "recover", "dump"], "fault_scheduling": "grace"},
    # No process-level recovery: delete and recreate all pods on a fault.
    "job-rescheduling-only": {"strategies": [], "fault_scheduling": "grace"},
    # Reschedule only the faulty pod, falling back to the whole job.
    "pod-rescheduling": {"strategies": [], "fault_scheduling": "grace", "pod_rescheduling": True},
    # ClusterD asks the control plane which strategy to use at every fault.
    "platform-mode": {
        "strategies": ["retry", "recover", "dump"],
        "fault_scheduling": "grace",
        "platform_mode": True,
        "decision_rules": [
            {"match": {"fault_type": ["uce"]}, "strategy": "retry"},
            {"match": {"rank0": True}, "strategy": "dump"},
        ],
        "default_strategy": "recover",
        "decision_timeout_s": 240,
    },
}


PRESET_DESCRIPTIONS = {
    "retry-first": "Online retry for memory/network faults, then migrate the faulty pod, then a dying-gasp "
    "checkpoint before rescheduling.",
    "process-recover": "Process-level rescheduling: move the faulty process to a healthy node.",
    "in-place": "Restart only the faulty processes where possible, migrate otherwise.",
    "dying-gasp": "Save a dying-gasp checkpoint, then reschedule the job.",
    "elastic": "Shrink by data parallelism when no spare node exists (PyTorch, 7.2+), else migrate or dump.",
    "job-rescheduling-only": "No process-level recovery: recreate all pods on a fault.",
    "pod-rescheduling": "Reschedule only the faulty pod, falling back to the whole job.",
    "platform-mode": "ClusterD asks the control plane which strategy to use at every fault.",
}


def builtin_presets_load(preset_model: Any) -> int:
    """Create or refresh every built-in preset through ``preset_model`` (the model, or a migration's
    historical model: this module imports no model, so a migration can call it); user presets stay."""
    # The built-ins are global presets: (cluster, namespace) empty once presets have a namespace
    # (policies.0005); the historical model of 0004 has no such fields yet.
    fields = {field.name for field in preset_model._meta.get_fields()}
    scope: dict[str, Any] = {"namespace": "", "cluster": None} if "namespace" in fields else {}
    for name, spec in BUILTIN_PRESETS.items():
        preset_model.objects.update_or_create(
            name=name,
            **scope,
            defaults={
                "spec": deepcopy(spec),
                "description": PRESET_DESCRIPTIONS.get(name, ""),
                "builtin": True,
            },
        )
    return len(BUILTIN_PRESETS)


def preset_names() -> tuple[str, ...]:
    return tuple(BUILTIN_PRESETS)


def builtin_preset(name: str) -> dict[str, Any] | None:
    """A copy of the named preset's spec (callers may change it), or None if there is none."""
    spec = BUILTIN_PRESETS.get(name)
    return deepcopy(spec) if spec is not None else None

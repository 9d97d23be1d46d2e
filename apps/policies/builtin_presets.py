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


def preset_names() -> tuple[str, ...]:
    return tuple(BUILTIN_PRESETS)


def builtin_preset(name: str) -> dict[str, Any] | None:
    """A copy of the named preset's spec (callers may change it), or None if there is none."""
    spec = BUILTIN_PRESETS.get(name)
    return deepcopy(spec) if spec is not None else None

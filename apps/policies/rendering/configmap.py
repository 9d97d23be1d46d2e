"""The ``taskd-manager-<job>`` ConfigMap that delivers manager.py and the launcher lines to the pods."""

from __future__ import annotations

from typing import Any

from mindcluster import keys as k

from .plan import RenderPlan

MANAGER_KEY = "manager.py"
LAUNCHER_KEY = "taskd-launcher.sh"


def taskd_configmap(plan: RenderPlan, manager_py: str, launcher: str) -> dict[str, Any]:
    """The ConfigMap the rendered pod templates mount at TASKD_MOUNT_PATH (same namespace as the job)."""
    metadata: dict[str, Any] = {"name": plan.configmap_name}
    if plan.namespace:
        metadata["namespace"] = plan.namespace
    metadata["labels"] = {k.MANAGED_BY_LABEL: k.MANAGED_BY_VALUE}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {MANAGER_KEY: manager_py, LAUNCHER_KEY: launcher},
    }

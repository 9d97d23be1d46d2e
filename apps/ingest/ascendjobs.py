"""AscendJob ``status.conditions`` (phase changes) and the restart-budget limits in its spec and labels."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apps.cluster.timestamps import parse_k8s_time
from apps.events import kinds
from apps.ingest.observation import JobRef, Observation, best_time
from mindcluster import keys as c

SOURCE = "ascendjob"


def ascendjob_ref(obj: dict[str, Any]) -> JobRef:
    meta = obj.get("metadata") or {}
    return JobRef(str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("uid", "")))


def current_condition(obj: dict[str, Any]) -> dict[str, Any]:
    """The last condition whose status is True (kubeflow appends; the newest true one is the phase)."""
    conditions = [
        cond
        for cond in ((obj.get("status") or {}).get("conditions") or [])
        if isinstance(cond, dict) and cond.get("status") == "True"
    ]
    return conditions[-1] if conditions else {}


def budget_limits(obj: dict[str, Any]) -> dict[str, int | None]:
    """``runPolicy.backoffLimit`` (≤0 or unset = unlimited) and the ``fault-retry-times`` label (0 = off)."""
    backoff = ((obj.get("spec") or {}).get("runPolicy") or {}).get("backoffLimit")
    labels = (obj.get("metadata") or {}).get("labels") or {}
    try:
        retry_times = int(str(labels.get(c.LABEL_FAULT_RETRY_TIMES, "0")))
    except ValueError:
        retry_times = 0
    valid_backoff = isinstance(backoff, int) and not isinstance(backoff, bool) and backoff > 0
    return {
        "backoff_limit": backoff if valid_backoff else None,
        "fault_retry_times": max(0, retry_times),
    }


def ascendjob_observations(
    previous: dict[str, Any], obj: dict[str, Any], received_at: datetime
) -> tuple[dict[str, Any], list[Observation]]:
    """New state and a ``job.phase_changed`` when the current condition's type changed."""
    cond = current_condition(obj)
    phase = str(cond.get("type", ""))
    state = {"phase": phase, **budget_limits(obj)}
    found: list[Observation] = []
    before = str(previous.get("phase", ""))
    if phase and phase != before:
        meta = obj.get("metadata") or {}
        when = parse_k8s_time(cond.get("lastTransitionTime") or cond.get("lastUpdateTime"))
        found.append(
            Observation(
                job=ascendjob_ref(obj),
                kind=kinds.JOB_PHASE_CHANGED,
                message=f"{before or 'new'} → {phase}"
                + (f" ({cond.get('reason')}: {cond.get('message')})" if cond.get("reason") else ""),
                source=SOURCE,
                data={
                    "phase": phase,
                    "previous": before,
                    "reason": str(cond.get("reason", "")),
                    "condition_message": str(cond.get("message", ""))[:300],
                },
                dedupe_key=f"acj:{meta.get('uid', '')}:{meta.get('resourceVersion', '')}:phase",
                occurred_at=best_time(when, received_at),
                severity="error" if phase == "Failed" else ("warning" if phase == "Restarting" else "info"),
            )
        )
    return state, found

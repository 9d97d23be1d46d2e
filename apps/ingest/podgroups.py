"""PodGroup ``<job>-<uid>``: ClusterD's outcome annotation, its platform-mode question, its pause label.

Level-triggered: the store keeps the last state it saw per PodGroup and this module turns the
difference into observations, so a relist or a replayed watch event repeats nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apps.events import kinds
from apps.ingest.observation import JobRef, Observation, split_uid_suffix
from mindcluster import keys as c

SOURCE = "podgroup"
EXIT_COMPLETED = "exit-completed"


def podgroup_job(obj: dict[str, Any]) -> JobRef:
    """The AscendJob a PodGroup belongs to: its owner reference, else the ``<job>-<uid>`` name."""
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace", ""))
    for owner in meta.get("ownerReferences") or []:
        if owner.get("kind") == c.ASCENDJOB_KIND and owner.get("name"):
            return JobRef(namespace, str(owner["name"]), str(owner.get("uid", "")))
    name, uid = split_uid_suffix(str(meta.get("name", "")))
    return JobRef(namespace, name, uid)


def podgroup_state(obj: dict[str, Any]) -> dict[str, str]:
    """The part of a PodGroup the ingester tracks."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    return {
        "status": str(annotations.get(c.ANNOTATION_RECOVER_STATUS, "") or ""),
        "confirm": str(annotations.get(c.ANNOTATION_CONFIRM_FAULT, "") or ""),
        "enable": str(labels.get(c.LABEL_PROCESS_RECOVER_ENABLE, "") or ""),
        "platform": "1" if c.ANNOTATION_PLATFORM_STRATEGY in annotations else "",
    }


def recover_status_kind(status: str) -> tuple[str, str] | None:
    """``retry-success`` → (recovery.succeeded, retry); ``dump-success`` → dump.saved; None if unknown."""
    if status == EXIT_COMPLETED:
        return kinds.TRAINING_EXITED, "exit"
    strategy, _, outcome = status.rpartition("-")
    if not strategy:
        return None
    if outcome == "success":
        return (kinds.DUMP_SAVED if strategy == "dump" else kinds.RECOVERY_SUCCEEDED), strategy
    if outcome == "failed":
        return kinds.RECOVERY_FAILED, strategy
    return None


def podgroup_observations(
    previous: dict[str, Any], obj: dict[str, Any], received_at: datetime
) -> tuple[dict[str, str], list[Observation]]:
    """New state and what changed since ``previous`` (empty for a PodGroup not seen before)."""
    state = podgroup_state(obj)
    meta = obj.get("metadata") or {}
    job = podgroup_job(obj)
    key_prefix = f"pg:{meta.get('uid', '')}:{meta.get('resourceVersion', '')}"
    found: list[Observation] = []
    status = state["status"]
    if status and status != previous.get("status", ""):
        mapped = recover_status_kind(status)
        if mapped is not None:
            kind, strategy = mapped
            found.append(
                Observation(
                    job=job,
                    kind=kind,
                    message=f"ClusterD reports {c.ANNOTATION_RECOVER_STATUS}={status}",
                    source=SOURCE,
                    data={"strategy": strategy, "status": status},
                    dedupe_key=f"{key_prefix}:{c.ANNOTATION_RECOVER_STATUS}",
                    occurred_at=received_at,
                )
            )
    confirm = state["confirm"]
    if confirm and confirm != previous.get("confirm", ""):
        found.append(
            Observation(
                job=job,
                kind=kinds.DECISION_REQUESTED,
                message=f"ClusterD asks the platform which strategy to use "
                f"({c.ANNOTATION_CONFIRM_FAULT}={confirm})",
                source=SOURCE,
                data={"confirm_fault": confirm},
                dedupe_key=f"{key_prefix}:{c.ANNOTATION_CONFIRM_FAULT}",
                occurred_at=received_at,
            )
        )
    return state, found

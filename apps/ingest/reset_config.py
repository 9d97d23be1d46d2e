"""ConfigMap ``reset-config-<job>`` (key ``reset.json``): faulty ranks and ClusterD's fault flushing.

mindcluster.md §6.3: ``RankList[{RankId, LogicId, Status, Policy, ErrorCode, ErrorCodeHex}]``,
``FaultFlushing``, ``RestartFaultProcess``, ``RetryTime``. A rank that becomes ``fault`` (ClusterD's
fault list: Status ``fault``, no code and no policy, ``setNewTaskInfo``,
``component/clusterd/pkg/domain/common/utils.go:231-269``; source facts D12) or ``unrecovered`` (the
device plugin's hot-reset document, with code and policy) is a detected fault; ``FaultFlushing``
turning on means training was stopped (notifyFaultFlushing writes no ranks, so that stop names none).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apps.events import kinds
from apps.ingest.observation import JobRef, Observation
from mindcluster import reset_json

SOURCE = "reset-config"
RESET_KEY = reset_json.DATA_KEY
UNRECOVERED = reset_json.STATUS_UNRECOVERED
FAULTY = (reset_json.STATUS_FAULT, UNRECOVERED)


def is_reset_configmap(obj: dict[str, Any]) -> bool:
    return reset_json.job_name_of(str((obj.get("metadata") or {}).get("name", ""))) is not None


def reset_job(obj: dict[str, Any]) -> JobRef:
    meta = obj.get("metadata") or {}
    return JobRef(str(meta.get("namespace", "")), reset_json.job_name_of(str(meta.get("name", ""))) or "")


def parse_reset(obj: dict[str, Any]) -> dict[str, Any]:
    """``reset.json`` as a dict; a missing or malformed document reads as empty (never raises)."""
    return reset_json.parse_configmap_data(obj.get("data"))


def reset_state(doc: dict[str, Any]) -> dict[str, Any]:
    ranks: dict[str, str] = {}
    for entry in doc.get("RankList") or []:
        if isinstance(entry, dict) and "RankId" in entry:
            ranks[str(entry["RankId"])] = str(entry.get("Status", ""))
    return {"ranks": ranks, "flushing": bool(doc.get("FaultFlushing"))}


def reset_observations(
    previous: dict[str, Any], obj: dict[str, Any], received_at: datetime
) -> tuple[dict[str, Any], list[Observation]]:
    """New state and the faults / training stops that appeared since ``previous``."""
    doc = parse_reset(obj)
    state = reset_state(doc)
    meta = obj.get("metadata") or {}
    job = reset_job(obj)
    key_prefix = f"cm:{meta.get('uid', '')}:{meta.get('resourceVersion', '')}"
    before: dict[str, str] = previous.get("ranks") or {}
    by_code: dict[str, list[dict[str, Any]]] = {}
    for entry in doc.get("RankList") or []:
        if not isinstance(entry, dict):
            continue
        rank = str(entry.get("RankId", ""))
        if entry.get("Status") in FAULTY and before.get(rank) not in FAULTY:
            by_code.setdefault(str(entry.get("ErrorCodeHex") or "").upper(), []).append(entry)

    def observed(kind: str, message: str, data: dict[str, Any], key: str) -> Observation:
        """One event of this ConfigMap version; ``key`` tells its events apart (replays dedupe)."""
        return Observation(
            job=job,
            kind=kind,
            message=message,
            source=SOURCE,
            data=data,
            dedupe_key=f"{key_prefix}:{key}",
            occurred_at=received_at,
        )

    found: list[Observation] = []
    for code, entries in sorted(by_code.items()):
        ranks = sorted({_int(e.get("RankId")) for e in entries})
        devices = sorted({str(e.get("LogicId", "")) for e in entries})
        policy = str(entries[0].get("Policy", ""))
        fault = {"ranks": ranks, "device": devices[0] if len(devices) == 1 else devices, "code": code}
        message = f"ranks {ranks} unrecovered (code {code or '-'}, policy {policy or '-'})"
        found.append(observed(kinds.FAULT_DETECTED, message, {**fault, "policy": policy}, f"fault:{code}"))
    if state["flushing"] and not previous.get("flushing", False):
        ranks = sorted(_int(r) for r, status in state["ranks"].items() if status in FAULTY)
        message = f"ClusterD stopped training to flush the fault (ranks {ranks})"
        stopped = {"ranks": ranks, "restart_type": str(doc.get("RestartType", ""))}
        found.append(observed(kinds.TRAINING_STOPPED, message, stopped, "flushing"))
    return state, found


def _int(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return -1

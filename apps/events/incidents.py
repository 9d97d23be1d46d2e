"""Incidents as a pure fold over typed events: one fault, the strategies tried, the outcome, the timings.

The reducer works on a plain dict (the fields of ``Incident``) so it is testable without a database;
``apps.events.incident_services`` loads, locks and saves the row around it.

Timings (mindcluster.md §7.1): *detect* is fault → ClusterD stopped training, *decide* is → the first
strategy chosen, *recover* is → training running again (or the job failed).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from apps.events import kinds

# Kinds that start or continue an incident when none is open.
OPENING_KINDS: Final = frozenset({kinds.FAULT_DETECTED, kinds.TRAINING_STOPPED, *kinds.STRATEGY_KINDS})
# Kinds that report how an incident went; late ones attach to the incident that just closed.
OUTCOME_KINDS: Final = frozenset(
    {
        kinds.RECOVERY_SUCCEEDED,
        kinds.RECOVERY_FAILED,
        kinds.DUMP_SAVED,
        kinds.TRAINING_EXITED,
        *kinds.RESCHEDULE_KINDS,
    }
)
INCIDENT_KINDS: Final = OPENING_KINDS | OUTCOME_KINDS
DECISION_KINDS: Final = frozenset(
    {kinds.DECISION_REQUESTED, kinds.DECISION_ANSWERED, kinds.DECISION_COMPLETED}
)
# Process-level strategies that restart training processes (count against torchrun --max_restarts).
PROCESS_RESTART_STRATEGIES: Final = frozenset({"recover", "recover-in-place", "elastic-training"})
RESCHEDULE_STRATEGY: Final = {
    kinds.POD_RESCHEDULED: "pod-rescheduling",
    kinds.JOB_RESCHEDULED: "job-rescheduling",
}

OPEN, RECOVERED, RESCHEDULED, FAILED = "open", "recovered", "rescheduled", "failed"


def fault_signature(data: dict[str, Any]) -> str:
    """What makes two reports the same fault: the fault code (empty for software faults).

    Sources disagree on everything else (ClusterD's stream names the node and device, reset.json
    the ranks), so the code is the one thing every report of a fault carries alike.
    """
    return "code:" + str(data.get("code") or "").upper()


def fault_ids(data: dict[str, Any]) -> list[str]:
    """The fault's own identity, when the report names it: an Event's ``[id]``, ClusterD's ``faultReason``.

    Unlike the signature, an id tells two faults of one code apart, so a report carrying one can be
    matched to the incident that already holds it however late it comes (a replay, a lagging source).
    Real ClusterD sends ``faultReason`` empty (component/clusterd/pkg/application/faultmanager/
    faultclusterprocess/cluster_fault_processor.go:234): its reports carry no id and are matched by
    signature and time.
    """
    ids: list[str] = []
    for value in [data.get("fault_id"), *(data.get("fault_reasons") or [])]:
        if value not in (None, "") and str(value) not in ids:
            ids.append(str(value))
    return ids


def new_incident(at: datetime) -> dict[str, Any]:
    """The fields of a freshly opened incident."""
    return {
        "opened_at": at,
        "detected_at": None,
        "decided_at": None,
        "closed_at": None,
        "outcome": OPEN,
        "fault": {"codes": [], "levels": [], "types": [], "signatures": [], "fault_ids": [], "sources": []},
        "strategies": [],
        "attempts": [],
        "ranks": [],
        "nodes": [],
        "decisions": [],
        "detect_ms": None,
        "decide_ms": None,
        "recover_ms": None,
    }


def _add(items: list[Any], value: Any) -> None:
    if value not in (None, "", []) and value not in items:
        items.append(value)


def merge_fault(incident: dict[str, Any], data: dict[str, Any], at: datetime) -> None:
    """Fold one fault report into the incident (any source, first or not)."""
    fault = incident["fault"]
    for key in ("codes", "levels", "types", "signatures", "fault_ids", "sources"):
        fault.setdefault(key, [])
    for source in data.get("sources") or []:
        _add(fault["sources"], source)
    _add(fault["codes"], str(data.get("code") or "").upper() or None)
    _add(fault["levels"], data.get("level"))
    _add(fault["types"], data.get("fault_type"))
    _add(fault["signatures"], fault_signature(data))
    _add(fault["fault_ids"], data.get("fault_id"))
    for ident in data.get("fault_reasons") or []:
        _add(fault["fault_ids"], ident)
    for rank in data.get("ranks") or []:
        _add(incident["ranks"], rank)
    incident["ranks"].sort()
    _add(incident["nodes"], data.get("node"))
    for node in data.get("nodes") or []:
        _add(incident["nodes"], node)
    if at < incident["opened_at"]:
        incident["opened_at"] = at


def _ms(later: datetime | None, earlier: datetime | None) -> int | None:
    if later is None or earlier is None:
        return None
    return max(0, round((later - earlier).total_seconds() * 1000))


def close(incident: dict[str, Any], outcome: str, at: datetime) -> None:
    """Close with ``outcome`` at ``at`` and compute detect → decide → recover."""
    incident["outcome"] = outcome
    incident["closed_at"] = max(at, incident["opened_at"])
    incident.update(durations(incident))


def durations(incident: dict[str, Any]) -> dict[str, int | None]:
    opened, detected, decided = incident["opened_at"], incident["detected_at"], incident["decided_at"]
    return {
        "detect_ms": _ms(detected, opened),
        "decide_ms": _ms(decided, detected or opened),
        "recover_ms": _ms(incident["closed_at"], decided or detected or opened),
    }


def apply(incident: dict[str, Any], kind: str, data: dict[str, Any], at: datetime) -> list[str]:
    """Fold one stored event into ``incident`` in place; returns what happened (``"closed"``)."""
    changes: list[str] = []
    if kind == kinds.FAULT_DETECTED:
        merge_fault(incident, data, at)
    elif kind == kinds.TRAINING_STOPPED:
        incident["detected_at"] = incident["detected_at"] or at
        for rank in data.get("ranks") or []:
            _add(incident["ranks"], rank)
    elif kind in kinds.STRATEGY_KINDS:
        strategy = str(data.get("strategy") or "")
        if strategy and (not incident["strategies"] or incident["strategies"][-1] != strategy):
            incident["strategies"].append(strategy)
        incident["decided_at"] = incident["decided_at"] or at
    elif kind in (kinds.RECOVERY_SUCCEEDED, kinds.RECOVERY_FAILED, kinds.DUMP_SAVED, kinds.TRAINING_EXITED):
        outcome = {
            kinds.RECOVERY_SUCCEEDED: "succeeded",
            kinds.RECOVERY_FAILED: "failed",
            kinds.DUMP_SAVED: "saved",
            kinds.TRAINING_EXITED: "exited",
        }[kind]
        strategy = "dump" if kind == kinds.DUMP_SAVED else ("exit" if kind == kinds.TRAINING_EXITED else "")
        strategy = str(data.get("strategy") or strategy)
        incident["attempts"].append({"strategy": strategy, "outcome": outcome, "at": at.isoformat()})
        # A result names the strategy it is the result of: it was tried. Real ClusterD reports the
        # choice itself to TaskD only (no Kubernetes Event), so on a real cluster without platform mode
        # the PodGroup's ProcessRecoverStatus is how the strategies tried become known; stopping
        # processes (exited) is not a strategy chosen.
        tried = strategy and kind != kinds.TRAINING_EXITED
        if tried and (not incident["strategies"] or incident["strategies"][-1] != strategy):
            incident["strategies"].append(strategy)
        if kind == kinds.RECOVERY_SUCCEEDED and incident["closed_at"] is None:
            close(incident, RECOVERED, at)
            changes.append("closed")
    elif kind in kinds.RESCHEDULE_KINDS:
        strategy = RESCHEDULE_STRATEGY[kind]
        if not incident["strategies"] or incident["strategies"][-1] != strategy:
            incident["strategies"].append(strategy)
        incident["attempts"].append(
            {
                "strategy": strategy,
                "outcome": "rescheduled",
                "reasons": data.get("reasons", []),
                "at": at.isoformat(),
            }
        )
        for node in data.get("nodes") or []:
            _add(incident["nodes"], node)
        if incident["closed_at"] is None:
            close(incident, RESCHEDULED, at)
            changes.append("closed")
    elif kind == kinds.JOB_PHASE_CHANGED and data.get("phase") == "Failed" and incident["closed_at"] is None:
        close(incident, FAILED, at)
        changes.append("closed")
    elif kind in DECISION_KINDS:
        incident["decisions"].append(
            {
                "kind": kind,
                "decision": data.get("decision"),
                "strategy": data.get("strategy", ""),
                "decided_by": data.get("decided_by", ""),
                "outcome": data.get("outcome", ""),
                "at": at.isoformat(),
            }
        )
    if kind in OPENING_KINDS and incident["closed_at"] is not None and "closed" not in changes:
        incident.update(durations(incident))  # reported after the outcome: the timings move with it
    return changes

"""Kubernetes Events on AscendJobs: a table from ``reason`` to typed kind (None = covered elsewhere).

Events expire after about an hour and are rate-limited by the recorder, so they are never the only
source of an outcome: recovery outcomes also come from the PodGroup, reschedules from
``job-reschedule-reason``, phases from the job's conditions. The store gives those kinds a semantic
key per incident, so the same outcome seen twice is stored once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from apps.cluster.timestamps import parse_k8s_time
from apps.events import kinds
from apps.ingest.observation import JobRef, Observation, best_time
from apps.ingest.podgroups import recover_status_kind
from mindcluster import keys as c

SOURCE = "k8s-event"

# "<kind> fault (code <code|->, level <level|business>) on pod rank <r> (process rank <p>, node <n>) [<id>]"
# Linear on any message: the kind starts only at the start of a word and every quantifier is
# possessive (none gives characters back), and the free-text fields are bounded, so a message that
# repeats "x fault (code " without its closer costs a constant per repetition, not a rescan to the end.
# (The unbounded form took 4.4 s on 20k characters and stalled the single ingester.) Codes and
# levels are short words; node names and fault ids are Kubernetes names (at most 253 characters).
_FAULT = re.compile(
    r"(?<!\w)(?P<fault_type>\w++) fault \(code (?P<code>[^,]{0,64}+), level (?P<level>[^)]{0,64}+)\)"
    r" on pod rank (?P<pod_rank>[0-9]++)"
    r"(?: \(process rank (?P<rank>[0-9]++), node (?P<node>[^)]{0,253}+)\))?"
    r"(?: \[(?P<fault_id>[^\]]{1,253}+)\])?"
)
_STRATEGY = re.compile(r"^(?P<strategy>[A-Za-z-]+):\s*(?P<reason>.*)$", re.DOTALL)
_OUTCOME = re.compile(r"^(?P<strategy>[A-Za-z-]+) (?:succeeded|failed)(?: \((?P<status>[\w-]+)\))?")


def _fault_data(message: str) -> dict[str, Any]:
    match = _FAULT.search(message)
    if not match:
        return {}
    found = match.groupdict()
    data: dict[str, Any] = {
        "fault_type": found["fault_type"],
        "code": "" if found["code"] in ("", "-") else found["code"].upper(),
        "level": "" if found["level"] in ("", "business") else found["level"],
        "pod_rank": int(found["pod_rank"]),
    }
    if found.get("rank") is not None:
        data["ranks"] = [int(found["rank"])]
    if found.get("node"):
        data["node"] = found["node"]
    if found.get("fault_id"):
        data["fault_id"] = found["fault_id"]
    return data


def _strategy_data(message: str) -> dict[str, Any]:
    match = _STRATEGY.match(message)
    return {"strategy": match.group("strategy"), "reason": match.group("reason")[:300]} if match else {}


def _outcome_data(message: str) -> dict[str, Any]:
    match = _OUTCOME.match(message)
    if not match:
        return {}
    data = {"strategy": match.group("strategy")}
    if match.group("status"):
        data["status"] = match.group("status")
    return data


def _no_data(message: str) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class ReasonRule:
    """How one Event reason becomes a typed event; ``kind`` None means another source covers it."""

    kind: str | None
    parse: Callable[[str], dict[str, Any]] = _no_data


REASONS: dict[str, ReasonRule] = {
    "FaultDetected": ReasonRule(kinds.FAULT_DETECTED, _fault_data),
    "StrategyChosen": ReasonRule(kinds.STRATEGY_CHOSEN, _strategy_data),
    # Same outcomes as the PodGroup's ProcessRecoverStatus: kept because a repeated identical status
    # does not change the PodGroup; the incident-scoped key stores each outcome once.
    "RecoverSucceeded": ReasonRule(kinds.RECOVERY_SUCCEEDED, _outcome_data),
    "RecoverFailed": ReasonRule(kinds.RECOVERY_FAILED, _outcome_data),
    "ProcessExited": ReasonRule(kinds.TRAINING_EXITED, _no_data),
    # Covered by job-reschedule-reason (with reasons) and the AscendJob's conditions.
    "PodRescheduled": ReasonRule(None),
    "JobRescheduled": ReasonRule(None),
    "JobFailed": ReasonRule(None),
    # Platform-mode chatter: the decisions app records the question and the answer.
    "WaitingForPlatform": ReasonRule(None),
    "PlatformStrategy": ReasonRule(None),
    "ProcessRecoverPaused": ReasonRule(None),
    "ProcessRecoverResumed": ReasonRule(None),
}
# Any other Warning about a job (operator validation: InvalidFramework, JobValidFailed, ...).
WARNING_RULE = ReasonRule(kinds.JOB_WARNING)
NORMAL_RULE = ReasonRule(None)


def event_job(event: dict[str, Any]) -> JobRef | None:
    """The AscendJob an Event is about, or None for Events about other objects."""
    involved = event.get("involvedObject") or event.get("regarding") or {}
    if involved.get("kind") != c.ASCENDJOB_KIND:
        return None
    namespace = str(involved.get("namespace") or (event.get("metadata") or {}).get("namespace", ""))
    return JobRef(namespace, str(involved.get("name", "")), str(involved.get("uid", "")))


def event_time(event: dict[str, Any]) -> datetime | None:
    """When the Event last happened: ``eventTime`` (events.k8s.io), else ``lastTimestamp`` or
    ``firstTimestamp`` (core/v1), else when the object was created."""
    meta = event.get("metadata") or {}
    return parse_k8s_time(
        event.get("eventTime") or event.get("lastTimestamp") or event.get("firstTimestamp")
    ) or parse_k8s_time(meta.get("creationTimestamp"))


def event_observations(event: dict[str, Any], received_at: datetime) -> list[Observation]:
    """Zero or one observation for one Event (``ADDED`` or ``MODIFIED`` with a higher ``count``)."""
    job = event_job(event)
    if job is None:
        return []
    reason = str(event.get("reason", ""))
    warning = event.get("type") == "Warning"
    rule = REASONS.get(reason, WARNING_RULE if warning else NORMAL_RULE)
    if rule.kind is None:
        return []
    message = str(event.get("message") or event.get("note") or "")
    meta = event.get("metadata") or {}
    count = event.get("count") or (event.get("series") or {}).get("count") or 1
    stamp = event_time(event)
    data = {"reason": reason, **rule.parse(message)}
    kind = rule.kind
    if kind in (kinds.RECOVERY_SUCCEEDED, kinds.RECOVERY_FAILED) and data.get("status"):
        # "dump succeeded (dump-success)" is a saved checkpoint, not a recovery: same table as the PodGroup.
        kind = (recover_status_kind(str(data["status"])) or (kind, ""))[0]
    return [
        Observation(
            job=job,
            kind=kind,
            message=message[:500] or reason,
            source=SOURCE,
            data=data,
            dedupe_key=f"k8s-event:{meta.get('uid', '')}:{count}",
            occurred_at=best_time(stamp, received_at),
            severity="warning" if warning and kind == kinds.JOB_WARNING else "",
        )
    ]

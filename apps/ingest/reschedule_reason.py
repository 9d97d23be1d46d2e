"""ConfigMap ``mindx-dl/job-reschedule-reason`` (key ``recent-reschedule-records``): why pods moved.

mindcluster.md §6.3: ``{"<ns>/<name>-<uid>": {JobID, TotalRescheduleTimes, RescheduleRecords[
{LogFileFormatTime, RescheduleTimeStamp, ReasonOfTask[{RescheduleReason, PodName, NodeName,
NodeRankIndex}]}]}}``, newest record first, last 10 kept. A rising ``TotalRescheduleTimes`` means new
records; each becomes a ``pod.rescheduled`` observation (the store turns it into ``job.rescheduled``
when it covers every pod of the job, which only the database knows).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from apps.events import kinds
from apps.ingest.observation import JobRef, Observation, best_time, split_uid_suffix
from mindcluster import keys as c

SOURCE = "reschedule-reason"
RECORDS_KEY = "recent-reschedule-records"


def is_reschedule_configmap(obj: dict[str, Any]) -> bool:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") == c.MINDX_NAMESPACE and meta.get("name") == c.RESCHEDULE_REASON_CONFIGMAP


def parse_records(obj: dict[str, Any]) -> dict[str, Any]:
    raw = (obj.get("data") or {}).get(RECORDS_KEY)
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def job_of_key(key: str) -> JobRef:
    """``<ns>/<name>-<uid>`` → the job."""
    namespace, _, rest = key.partition("/")
    name, uid = split_uid_suffix(rest)
    return JobRef(namespace, name, uid)


def reschedule_observations(
    previous: dict[str, Any], obj: dict[str, Any], received_at: datetime
) -> tuple[dict[str, Any], list[Observation]]:
    """New state (``{job key: TotalRescheduleTimes}``) and one observation per new record."""
    records = parse_records(obj)
    state: dict[str, int] = {}
    found: list[Observation] = []
    for key, entry in sorted(records.items()):
        if not isinstance(entry, dict):
            continue
        total = _int(entry.get("TotalRescheduleTimes"))
        state[key] = total
        seen = _int(previous.get(key, 0))
        if total <= seen:
            continue
        history = [r for r in entry.get("RescheduleRecords") or [] if isinstance(r, dict)]
        new = history[: total - seen]  # newest first
        # Oldest new record first, numbered so the key names the reschedule (1st, 2nd, ...).
        for offset, record in enumerate(reversed(new)):
            number = total - len(new) + offset + 1
            found.append(_observation(key, number, total, record, received_at))
    return state, found


def _observation(
    key: str, number: int, total: int, record: dict[str, Any], received_at: datetime
) -> Observation:
    tasks = [t for t in record.get("ReasonOfTask") or [] if isinstance(t, dict)]
    reasons = sorted({str(t.get("RescheduleReason", "")) for t in tasks if t.get("RescheduleReason")})
    pods = [str(t.get("PodName", "")) for t in tasks]
    nodes = sorted({str(t.get("NodeName", "")) for t in tasks if t.get("NodeName")})
    stamp = _int(record.get("RescheduleTimeStamp"))
    source_time = datetime.fromtimestamp(stamp, tz=UTC) if stamp > 0 else None
    return Observation(
        job=job_of_key(key),
        kind=kinds.POD_RESCHEDULED,
        message=f"reschedule #{number}: {', '.join(pods) or 'pods'} "
        f"({', '.join(reasons) or 'no reason given'})",
        source=SOURCE,
        data={
            "reasons": reasons,
            "pods": pods,
            "nodes": nodes,
            "ranks": sorted(_int(t.get("NodeRankIndex")) for t in tasks),
            "number": number,
            "total": total,
        },
        dedupe_key=f"rr:{key}:{number}",
        occurred_at=best_time(source_time, received_at),
    )


def _int(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0

"""Fault reports that need not wait for the reorder hold.

The reorder buffer holds an item until every watched stream has passed its version, and a quiet
stream passes versions only with a bookmark: about once a minute from kube-apiserver, so on a real
cluster most items wait the whole hold (``EVENTS_INGEST_REORDER_SECONDS``). Order matters because
an item may join, open or close an incident. A *first* fault report of a job that has no open
incident and none closed within ``EVENTS_INCIDENT_LATE_SECONDS`` opens a new incident whatever
comes before it: an older item still held or in flight is of the same fault (a strategy, a stop, a
second report: it joins that incident, as in order) or too old to join anything. So it is stored on
arrival, and again in order, when the store recognises it (a handled Event, an unchanged ClusterD
fault set) and only its cursor moves.

Not while an older fault report of the same job is still held (a backlog, a slow database, a
replay): the stored view of the job lags it, so that job's reports go in order; nor during a
take-over's warm-up; and an Event whose own time is older than the late window is a replay, not
news (the short soak caught both: a live fault stored ahead of the same job's replayed faults took
their incident). Other jobs' backlog does not stop a job's first report: in a storm of 200 jobs
the applier is seconds behind, and waiting for the whole backlog made the first report of the last
job wait for everyone else's (an earlier version counted any due item as "behind": p99 1.7 s).
"""

from __future__ import annotations

from collections import Counter

from django.utils import timezone

from apps.clusterd.client import FaultSignal
from apps.events import kinds
from apps.ingest import clusterd_faults
from apps.ingest.items import Item
from apps.ingest.k8s_events import REASONS, event_job, event_time
from apps.ingest.observation import JobRef


def recent(item: Item, seconds: float) -> bool:
    """Whether the report happened within ``seconds`` of now: an Event replayed from a backlog (its
    own time is old) waits in order. A ClusterD signal is live by nature (the stream is not replayed)."""
    if item.is_signal:
        return True
    obj = item.obj if isinstance(item.obj, dict) else {}
    stamp = event_time(obj)
    return stamp is not None and abs((timezone.now() - stamp).total_seconds()) <= seconds


def fault_report_job(item: Item) -> JobRef | None:
    """The job a fault report is about: a ``FaultDetected`` Event or a ClusterD ``fault`` signal."""
    if item.is_signal:
        signal = item.obj
        if isinstance(signal, FaultSignal) and signal.job_id and signal.signal_type != clusterd_faults.NORMAL:
            return JobRef("", "", signal.job_id)
        return None
    if item.resource != "events" or item.event_type not in ("ADDED", "MODIFIED"):
        return None
    obj = item.obj if isinstance(item.obj, dict) else {}
    rule = REASONS.get(str(obj.get("reason", "")))  # the one table of what each Event reason means
    return event_job(obj) if rule is not None and rule.kind == kinds.FAULT_DETECTED else None


class HeldFaults:
    """The fault reports held and not yet stored in order, counted per job (keyed without a query)."""

    def __init__(self) -> None:
        self._per_job: Counter[str] = Counter()
        self._key_of: dict[int, str] = {}  # id(item) → its job's key, while the item is held

    def older_held(self, key: str) -> bool:
        return self._per_job[key] > 0

    def arrived(self, key: str, item: Item) -> None:
        self._per_job[key] += 1
        self._key_of[id(item)] = key

    def left(self, item: Item) -> None:
        key = self._key_of.pop(id(item), None)
        if key is not None:
            self._per_job[key] -= 1
            if self._per_job[key] <= 0:
                del self._per_job[key]

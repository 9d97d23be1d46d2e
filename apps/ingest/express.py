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

Only while the applier keeps up: during a take-over's warm-up, or while items are due and not yet
stored (a backlog, a slow database), the stored view of the job lags and an older fault of it may
be among them, so everything goes in order; and an Event whose own time is older than the late
window is a replay, not news (the short soak caught both: a live fault stored ahead of the same
job's replayed faults took their incident).
"""

from __future__ import annotations

from django.utils import timezone

from apps.cluster.timestamps import parse_k8s_time
from apps.clusterd.client import FaultSignal
from apps.ingest import clusterd_faults
from apps.ingest.items import Item
from apps.ingest.k8s_events import event_job
from apps.ingest.observation import JobRef

FAULT_REASON = "FaultDetected"  # k8s_events.REASONS: the Event that reports a fault


def recent(item: Item, seconds: float) -> bool:
    """Whether the report happened within ``seconds`` of now: an Event replayed from a backlog (its
    own time is old) waits in order. A ClusterD signal is live by nature (the stream is not replayed)."""
    if item.is_signal:
        return True
    obj = item.obj if isinstance(item.obj, dict) else {}
    stamp = parse_k8s_time(obj.get("eventTime") or obj.get("lastTimestamp") or obj.get("firstTimestamp"))
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
    return event_job(obj) if obj.get("reason") == FAULT_REASON else None

"""The per-process Prometheus counters of the events path, in the registry ``/metrics`` serves.

The database gauges and the endpoint itself are in ``apps/api/metrics.py``: they read the policies'
sync state as well, and the events app must not depend on the policies app.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prometheus_client import Counter, Gauge

from apps.core import metrics as core

# Registered, like every metric of apps.core.metrics, in prometheus_client's default registry: one
# registry per process, served whole.

EVENTS_STORED = Counter("controlplane_events_stored_in_process", "Events stored by this process", ["kind"])
BROADCAST_FAILURES = Counter(
    "controlplane_broadcast_failures",
    "group_send calls that failed (frames recovered from the DB)",
)
OPEN_SOCKETS = Gauge("controlplane_websocket_open", "Open /ws/events/ sockets in this process")
FRAMES_SENT = Counter("controlplane_websocket_frames_sent", "Frames sent to browsers by type", ["type"])
GAPS_FILLED = Counter(
    "controlplane_websocket_gap_fills",
    "Events sent from the database because a live frame was missing",
)
INGEST_ERRORS = Counter(
    "controlplane_ingest_errors",
    "Ingester failures by source (watch errors, store errors)",
    ["source"],
)


def event_stored(event: Any) -> None:
    """After the commit that stored ``event``: counted, and its lag from the cluster's own timestamp."""
    EVENTS_STORED.labels(kind=event.kind).inc()
    if event.kind.startswith("fault."):
        core.FAULTS.labels(source=event.source).inc()
    if event.occurred_at is not None and event.stored_at is not None:
        lag = (event.stored_at - event.occurred_at).total_seconds()
        core.INGEST_LAG_SECONDS.labels(source=event.source).observe(max(0.0, lag))


def event_handed_to_broadcast(event: Any) -> None:
    """The live stream has the event: stored → handed to the channel layer's sender."""
    if event.stored_at is not None:
        core.BROADCAST_LAG_SECONDS.observe(max(0.0, (datetime.now(UTC) - event.stored_at).total_seconds()))


def broadcast_failed() -> None:
    BROADCAST_FAILURES.inc()

"""The only place sync code touches the channel layer. Groups: ``job-<id>`` (events) and ``jobs`` (summaries).

Called after commit, so a frame never describes a row that was rolled back. Sending is
fire-and-forget on one background event loop per process: the database is the system of record,
and a frame lost here (Redis down, a full channel) is recovered by the consumer, which checks the
stored ``seq`` and fills any gap from the database. Frames of one group are sent in order.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
import zlib
from typing import Any

from channels.layers import get_channel_layer

from apps.core.supervision import Supervisor
from apps.events.models import JobEvent

log = logging.getLogger(__name__)

JOBS_GROUP = "jobs"
# Channels' handler name for event frames (``type`` is rewritten to the wire value by the consumer).
EVENT_HANDLER = "events.event"
SUMMARY_HANDLER = "events.summary"
_LANES = 4  # ordered per group, parallel across groups


def job_group(job_id: int) -> str:
    return f"job-{job_id}"


class _Sender:
    """A daemon thread running an asyncio loop with one ordered queue per lane."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.queues: list[asyncio.Queue[tuple[str, dict[str, Any]] | None]] = []
        self.pending = 0
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        ready = threading.Event()
        # Supervised for its status and metrics; a crashed loop is not restarted in place (its queues
        # went with it): the next broadcast finds the thread dead and starts a new sender (``ended``
        # says so to readiness: its restart is on its way).
        ended = threading.Event()
        self.thread = Supervisor(
            "events-broadcast", lambda: self._run(ready), stop=ended, on_crash=lambda exc: ended.set()
        ).start()
        ready.wait(5)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.queues = [asyncio.Queue() for _ in range(_LANES)]
        for queue in self.queues:
            self.loop.create_task(self._drain(queue))
        ready.set()
        self.loop.run_forever()

    async def _drain(self, queue: asyncio.Queue[tuple[str, dict[str, Any]] | None]) -> None:
        while True:
            item = await queue.get()
            if item is None:
                return
            group, message = item
            try:
                layer = get_channel_layer()  # looked up each time: settings may change (tests)
                if layer is not None:
                    await layer.group_send(group, message)
            except Exception as exc:  # Redis down or restarting: consumers recover from the database
                from apps.events import metrics

                metrics.broadcast_failed()
                log.warning("broadcast to %s failed: %s", group, exc.__class__.__name__)
            finally:
                with self.idle:
                    self.pending -= 1
                    self.idle.notify_all()

    def submit(self, group: str, message: dict[str, Any]) -> None:
        lane = self.queues[zlib.crc32(group.encode()) % _LANES]
        with self.lock:
            self.pending += 1
        self.loop.call_soon_threadsafe(lane.put_nowait, (group, message))

    def flush(self, timeout: float) -> bool:
        with self.idle:
            return self.idle.wait_for(lambda: not self.pending, timeout)


_sender: _Sender | None = None
_sender_lock = threading.Lock()


def _get_sender() -> _Sender:
    global _sender
    with _sender_lock:
        # A forked child (Celery prefork) inherits a dead thread: start its own.
        if _sender is None or _sender.pid != os.getpid() or not _sender.thread.is_alive():
            _sender = _Sender()
        return _sender


def broadcast(group: str, message: dict[str, Any]) -> None:
    """Queue ``message`` for ``group``; never blocks on Redis, never raises."""
    try:
        _get_sender().submit(group, message)
    except Exception:  # the event is stored; a lost frame is recovered by the consumers
        log.exception("cannot queue a broadcast to %s", group)


def warm() -> None:
    """Start the sender and build the channel layer now, before the first event is stored.

    Building the layer imports channels_redis and the Redis client: about 200 ms on a 2-core
    machine, which the first broadcast of a process would otherwise pay in front of its frame (and
    every frame queued behind it; bench/bench_events.py saw p99 of its first second go to 300 ms).
    Never raises, like ``broadcast``: a layer that cannot be built fails there again, per frame.
    """
    try:
        _get_sender()
        get_channel_layer()
    except Exception:
        log.exception("cannot prepare the live-events broadcaster")


def flush(timeout: float = 5.0) -> bool:
    """Wait until queued frames were handed to the channel layer (for shutdown and tests)."""
    return _sender.flush(timeout) if _sender is not None else True


def event_frame(event: JobEvent) -> dict[str, Any]:
    """The channel-layer message for one stored event.

    ``text`` is the wire frame encoded once here, so a server does not encode it again per socket;
    ``frame`` carries the same data for the consumer's seq bookkeeping; ``sent_ns`` lets it tell
    how far behind a socket is.
    """
    frame = event.as_message()
    return {
        "type": EVENT_HANDLER,
        "frame": {"job": frame["job"], "seq": frame["seq"], "kind": frame["kind"]},
        "text": json.dumps(frame, separators=(",", ":")),
        "sent_ns": time.time_ns(),
    }


def summary_frame(event: JobEvent) -> dict[str, Any]:
    """A ``{"type": "job"}`` summary: enough for a jobs list to update one row."""
    job = event.job
    return {
        "type": SUMMARY_HANDLER,
        "frame": {
            "type": "job",
            "job": event.job_id,
            "name": job.name,
            "namespace": job.namespace,
            "phase": event.data.get("phase", "") if event.kind == "job.phase_changed" else job.phase,
            "last_seq": event.seq,
            "last_kind": event.kind,
            "severity": event.severity,
            "occurred_at": event.occurred_at.isoformat(),
        },
    }


def broadcast_event(event: JobEvent) -> None:
    """Tell the job's subscribers and the jobs list about a stored event."""
    broadcast_events([event])


def broadcast_events(events: list[JobEvent]) -> None:
    """A burst of one job's stored events: every event frame, and one summary (the newest wins anyway)."""
    for event in events:
        broadcast(job_group(event.job_id), event_frame(event))
    if events:
        broadcast(JOBS_GROUP, summary_frame(events[-1]))

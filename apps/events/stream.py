"""The stream logic of ``/ws/events/`` (design.md §4.3), apart from the socket: replay, live, repair, resync.

``JobStreams`` is the per-job streams of one socket. It knows nothing of Channels or Django: it reads
stored events through an ``EventLog``, sends through a ``FrameSink`` and asks ``Followers`` (the
process's ``apps.events.fanout.FanoutHub``) for a job's live frames, which the hub appends to
``inbox``. ``apps.events.consumers`` wires those three to the database, the socket and the hub.

How "no gap, no duplicate" holds: on subscribe the streams are registered with the hub *before* the
log is read, so frames stored meanwhile wait in the inbox; the stored events ``seq > after_seq``
are replayed and the last seq sent is recorded; live frames at or below it are dropped
(duplicates), a frame further ahead than the next seq means frames were lost (full channel, Redis
restart) and the gap is filled from the log. The hub's periodic check (``check_head``) compares the
stored head with what was sent, which also catches a lost *last* frame.

When more than ``StreamLimits.max_replay`` events would have to be sent at once, or live frames
arrive more than ``max_lag_ns`` after they were broadcast (the browser cannot keep up), the client
gets ``resync`` instead and the job is unfollowed: it pages ``GET /api/v1/jobs/{id}/events/`` from
``from_seq`` up to ``to_seq`` and subscribes again. When ``coalesce_after`` or more frames wait at
once, runs of consecutive ``COALESCIBLE_KINDS`` events go out as one ``coalesced`` frame. Event
frames are never dropped except as a whole backlog replaced by a ``resync`` (they are all stored).

``Summaries`` is the jobs-summary stream: at most one ``job`` frame per job per flush, newest wins.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict

from apps.events import kinds, metrics

log = logging.getLogger(__name__)

# Reports that may be merged into a ``coalesced`` frame when a socket is behind: many ranks' fault
# reports and repeated warnings. Everything else changes what MindCluster does or what the job is,
# and is always sent as its own frame.
COALESCIBLE_KINDS = frozenset({kinds.FAULT_DETECTED, kinds.JOB_WARNING})
# The ``type`` of an inbox item queued by ``check_head`` (``{"type": REPAIR, "job": id, "upto": n}``):
# fill the job's stream from the log, in order with the live frames around it. Live frames are the
# channel-layer messages of ``apps.events.broadcast.event_frame``: ``frame`` (``job``, ``seq``,
# ``kind``), ``text`` (the wire frame, encoded once) and ``sent_ns`` (when it was broadcast).
REPAIR = "repair"


class ResyncFrame(TypedDict):
    type: Literal["resync"]
    job: int
    from_seq: int
    to_seq: int


class CoalescedFrame(TypedDict):
    type: Literal["coalesced"]
    job: int
    from_seq: int
    to_seq: int
    count: int
    kinds: dict[str, int]


class EventLog(Protocol):
    """The stored events, the system of record; rows are ``JobEvent.as_message()`` frames."""

    async def head_seq(self, job_id: int) -> int: ...

    async def events_after(self, job_id: int, after_seq: int, limit: int) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class FrameSink:
    """The socket: ``text`` sends an event frame already encoded by the broadcaster as is (the hot
    path), ``frame`` encodes and sends any other frame. Two callables rather than a protocol, so a
    Channels consumer can pass its private methods (a public ``send_text`` would be a handler
    that any channel-layer message of type ``send.text`` could call)."""

    text: Callable[[str], Awaitable[None]]
    frame: Callable[[Mapping[str, Any]], Awaitable[None]]


class Followers(Protocol):
    """Who hands a job's live frames to ``JobStreams.inbox`` (``FanoutHub``)."""

    async def follow(self, job_id: int, subscriber: JobStreams) -> None: ...

    async def unfollow(self, job_id: int, subscriber: JobStreams) -> None: ...


@dataclass(frozen=True)
class StreamLimits:
    """``EVENTS_WS_MAX_REPLAY``, ``EVENTS_WS_MAX_LAG_SECONDS`` (in ns), ``EVENTS_WS_COALESCE_AFTER``."""

    max_replay: int
    max_lag_ns: int
    coalesce_after: int


@dataclass
class Subscription:
    """One job a socket follows: the last seq it was sent."""

    job_id: int
    last_sent: int
    checked_head: int = 0  # the stored head at the previous check


class JobStreams:
    """The per-job event streams of one socket; see the module docstring for the rules."""

    def __init__(
        self,
        stored: EventLog,
        sink: FrameSink,
        followers: Followers,
        limits: StreamLimits,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.stored = stored
        self.sink = sink
        self.followers = followers
        self.limits = limits
        self.clock_ns = clock_ns
        self.subs: dict[int, Subscription] = {}
        self.inbox: deque[dict[str, Any]] = deque()  # live frames from the hub, oldest first
        # The drain task's wake-up: a bare future rather than an asyncio.Event, whose wait() and
        # set() cost a coroutine and a waiter list per frame per socket on the hot path.
        self.waiter: asyncio.Future[None] | None = None
        self.pending = False  # woken while the drain task was busy: drain again before waiting
        # Held while frames of a job are sent: a subscribe's replay and the drain of live frames
        # must not interleave, or the seq bookkeeping would see its own frames as gaps.
        self.lock = asyncio.Lock()

    # --- what the socket's client asks for ----------------------------------------------------------
    def follows(self, job_id: int) -> bool:
        return job_id in self.subs

    @property
    def jobs(self) -> list[int]:
        return list(self.subs)

    async def subscribe(self, job_id: int, after_seq: int) -> None:
        """Replay the stored events after ``after_seq`` (or ``resync``), then stream live ones."""
        async with self.lock:
            await self.followers.follow(job_id, self)  # join first ...
            sub = self.subs.get(job_id) or Subscription(job_id, after_seq)
            sub.last_sent = after_seq
            self.subs[job_id] = sub
            await self._catch_up(sub)  # ... then replay: frames stored meanwhile wait in the inbox

    async def unsubscribe(self, job_id: int) -> None:
        async with self.lock:
            if self.subs.pop(job_id, None) is not None:
                await self.followers.unfollow(job_id, self)

    async def keep_only(self, visible: Collection[int], checked: Collection[int]) -> list[int]:
        """Stop the streams of the jobs in ``checked`` but not in ``visible`` (access was rechecked for
        ``checked``); returns those jobs. A job subscribed while the check ran was not asked about and
        stays: its own subscribe checked it (dropping it was a silent stream, seen under load)."""
        async with self.lock:
            gone = [job_id for job_id in self.subs if job_id in checked and job_id not in visible]
            for job_id in gone:
                del self.subs[job_id]
                await self.followers.unfollow(job_id, self)
            return gone

    async def close(self) -> None:
        """Unfollow every job (the socket closed). Not under the lock: the drain task is cancelled."""
        jobs = list(self.subs)
        self.subs.clear()
        for job_id in jobs:
            await self.followers.unfollow(job_id, self)

    # --- replay and resync ----------------------------------------------------------------------
    async def _catch_up(self, sub: Subscription) -> None:
        """Send every stored event after ``sub.last_sent``, or ``resync`` when that is too many."""
        head = await self.stored.head_seq(sub.job_id)
        if head - sub.last_sent > self.limits.max_replay:  # decided on one cheap aggregate, not 1,000 rows
            await self._resync(sub, head)
            return
        for frame in await self.stored.events_after(sub.job_id, sub.last_sent, self.limits.max_replay):
            await self.sink.frame(frame)
            sub.last_sent = frame["seq"]

    async def _resync(self, sub: Subscription, head: int | None = None) -> None:
        """Tell the client to page over REST from ``last_sent``; stop streaming this job to it."""
        if head is None:
            head = await self.stored.head_seq(sub.job_id)
        self.subs.pop(sub.job_id, None)
        await self.followers.unfollow(sub.job_id, self)
        resync: ResyncFrame = {"type": "resync", "job": sub.job_id, "from_seq": sub.last_sent, "to_seq": head}
        await self.sink.frame(resync)

    # --- live frames from the hub ---------------------------------------------------------------
    def wake(self) -> None:
        """Called by the hub after appending to ``inbox``: the drain task takes it from here."""
        waiter = self.waiter
        if waiter is None:
            self.pending = True
        elif not waiter.done():
            waiter.set_result(None)

    def check_head(self, job_id: int, head: int) -> None:
        """The hub's periodic check: ``head`` is the job's stored head seq now.

        Only what was stored before the previous check and is still unsent counts as lost (newer
        events are most likely still on their way): that is repaired from the log by the drain
        task, in order with the live frames.
        """
        sub = self.subs.get(job_id)
        if sub is None:
            return
        overdue, sub.checked_head = sub.checked_head, head
        if sub.last_sent < overdue:
            self.inbox.append({"type": REPAIR, "job": job_id, "upto": overdue})
            self.wake()

    async def drain_forever(self) -> None:
        """Send what the hub queued, in order; one wake-up can carry many frames under load."""
        loop = asyncio.get_running_loop()
        while True:
            if not self.pending:
                self.waiter = loop.create_future()
                try:
                    await self.waiter
                finally:
                    self.waiter = None
            self.pending = False
            await self.drain()

    async def drain(self) -> None:
        """Send everything queued now (and whatever is queued while sending)."""
        inbox, lock = self.inbox, self.lock
        while inbox:
            # Not while a subscribe or catch-up replays from the log. acquire/release rather than
            # ``async with``: two coroutines fewer per wake-up, and a wake-up is about one frame.
            await lock.acquire()
            try:
                while inbox:
                    batch = list(inbox)
                    inbox.clear()
                    try:
                        if len(batch) >= self.limits.coalesce_after:
                            await self._deliver_coalesced(batch)
                        else:
                            await self._deliver(batch)
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:  # the database is briefly away: the check repairs
                        log.info("websocket delivery failed: %s", exc.__class__.__name__)
            finally:
                lock.release()

    async def _deliver_coalesced(self, batch: list[dict[str, Any]]) -> None:
        """A backlog: runs of consecutive report events of one job go out as one ``coalesced`` frame.

        Only ``COALESCIBLE_KINDS`` are merged; every other event (strategy, outcome, phase,
        decision, policy...) is sent as itself, in order, so no state change is ever hidden.
        The frame names the exact seq range, so the client's seq stays gap-free and it can
        page the details over REST (``after_seq=from_seq - 1``).
        """
        runs: dict[int, list[dict[str, Any]]] = {}  # job -> the run being built (hub messages)
        subs = self.subs
        for message in batch:
            if message.get("type") == REPAIR:
                await self._flush_run(message["job"], runs.pop(message["job"], None))
                await self._repair(message["job"], message["upto"])
                continue
            meta = message["frame"]
            job_id, seq = meta["job"], meta["seq"]
            sub = subs.get(job_id)
            if sub is None:
                continue
            run = runs.get(job_id)
            expected = (run[-1]["frame"]["seq"] if run else sub.last_sent) + 1
            if meta.get("kind") in COALESCIBLE_KINDS and seq == expected and message.get("text"):
                if run is None:
                    runs[job_id] = [message]
                else:
                    run.append(message)
                continue
            await self._flush_run(job_id, runs.pop(job_id, None))
            await self._deliver((message,))
        for job_id, run in list(runs.items()):
            await self._flush_run(job_id, run)

    async def _flush_run(self, job_id: int, run: list[dict[str, Any]] | None) -> None:
        sub = self.subs.get(job_id)
        if not run or sub is None:
            return
        if len(run) == 1:
            await self.sink.text(run[0]["text"])
        else:
            counts = Counter(message["frame"]["kind"] for message in run)
            coalesced: CoalescedFrame = {
                "type": "coalesced",
                "job": job_id,
                "from_seq": run[0]["frame"]["seq"],
                "to_seq": run[-1]["frame"]["seq"],
                "count": len(run),
                "kinds": dict(counts),
            }
            await self.sink.frame(coalesced)
        sub.last_sent = run[-1]["frame"]["seq"]

    async def _deliver(self, batch: Iterable[dict[str, Any]]) -> None:
        """Inbox items one by one: live frames (sent as the broadcaster encoded them) and repairs;
        lock held. One loop over the batch rather than a call per frame: this is the hot path."""
        subs, text = self.subs, self.sink.text
        # The oldest frame's age is read once per batch (frames behind it are newer): a clock
        # call per frame per socket is measurable on this path.
        too_old = self.clock_ns() - self.limits.max_lag_ns
        for message in batch:
            if message.get("type") == REPAIR:
                await self._repair(message["job"], message["upto"])
                continue
            frame = message["frame"]
            sub = subs.get(frame["job"])
            if sub is None:
                continue
            seq = frame["seq"]
            if seq <= sub.last_sent:
                continue  # replayed already, or a duplicate
            sent_ns = message.get("sent_ns")
            if sent_ns and sent_ns < too_old:
                # This socket is too far behind to catch up frame by frame: drop its backlog (the
                # events are stored) and let the client page over REST, instead of queueing more.
                await self._resync(sub)
                continue
            if seq == sub.last_sent + 1:
                await text(message.get("text") or json.dumps(frame))
                sub.last_sent = seq
                continue
            metrics.GAPS_FILLED.inc(seq - sub.last_sent - 1)
            await self._catch_up(sub)

    async def _repair(self, job_id: int, upto: int) -> None:
        sub = self.subs.get(job_id)
        if sub is not None and sub.last_sent < upto:
            metrics.GAPS_FILLED.inc(upto - sub.last_sent)
            await self._catch_up(sub)


class Summaries:
    """The ``{"subscribe": {"jobs": "all"}}`` stream of one socket: ``job`` frames of visible jobs,
    at most one per job per ``flush`` (``EVENTS_WS_SUMMARY_SECONDS``), the newest wins."""

    def __init__(self, sink: FrameSink) -> None:
        self.sink = sink
        self.following = False
        self.visible: set[int] = set()
        self.pending: dict[int, dict[str, Any]] = {}

    def start(self, visible: set[int]) -> None:
        self.visible = visible
        self.following = True

    def refresh(self, visible: set[int]) -> None:
        """The jobs the user may see now (grants change; the consumer rereads them periodically)."""
        self.visible = visible

    def stop(self) -> None:
        self.following = False
        self.pending.clear()

    def offer(self, frame: dict[str, Any]) -> None:
        if self.following and frame["job"] in self.visible:
            self.pending[frame["job"]] = frame

    async def flush(self) -> None:
        frames, self.pending = self.pending, {}
        for frame in frames.values():
            await self.sink.frame(frame)

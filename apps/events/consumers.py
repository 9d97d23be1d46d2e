"""``/ws/events/`` (design.md §4.3): replay from ``after_seq``, then live, with no gap and no duplicate.

Client → server: ``{"subscribe": {"job": id, "after_seq": n}}``, ``{"subscribe": {"jobs": "all"}}``,
``{"unsubscribe": {"job": id}}`` / ``{"unsubscribe": {"jobs": "all"}}``.
Server → client: ``{"type": "event", "job", "seq", ...}``, ``{"type": "job", ...}`` summaries,
``{"type": "resync", "job", "from_seq", "to_seq"}``, ``{"type": "error", "error", ...}``, and, for a
socket that has fallen behind, ``{"type": "coalesced", "job", "from_seq", "to_seq", "count", "kinds"}``:
that many fault reports / warnings (seqs ``from_seq``..``to_seq``, all stored) in one frame.

Live frames reach a socket through its process's ``FanoutHub`` (``apps.events.fanout``), which joins
``job-<id>`` once per process and appends each frame to the inbox of every local follower; the
socket's own drain task sends them. How "no gap, no duplicate" holds: on subscribe the socket is
registered with the hub *before* the database is read, so frames stored meanwhile wait in its
inbox; it replays ``seq > after_seq`` and
records the last seq sent; live frames with ``seq`` at or below it are dropped (duplicates), a frame
further ahead than the next seq means frames were lost (full channel, Redis restart) and the gap is
filled from the database. A periodic check compares the stored head with what was sent, which also
catches a lost *last* frame (and, after a Redis restart, re-joins the groups Redis forgot). When more
than ``EVENTS_WS_MAX_REPLAY`` events would have to be sent at once, or live frames reach the socket
more than ``EVENTS_WS_MAX_LAG_SECONDS`` after they were broadcast (the browser cannot keep up), the
client gets ``resync`` instead and the queued frames for that job are dropped: it pages
``GET /api/v1/jobs/{id}/events/?after_seq=from_seq`` up to ``to_seq`` and subscribes again with the
last seq it got (the server has unsubscribed it). ``job`` summaries are coalesced: at most one per job
per ``EVENTS_WS_SUMMARY_SECONDS``, latest wins. Event frames are never merged, and never dropped
except as a whole backlog replaced by a ``resync`` (they are all in the database).

Access is rechecked every ``EVENTS_WS_ACCESS_CHECK_SECONDS`` (issue #16): a revoked or expired
token, a disabled user or an ended session closes the socket (code 4403, after an ``error`` frame
with code ``access_revoked``); a job the user may no longer see is unsubscribed with such a frame.
Subscribing is limited per socket: ``EVENTS_WS_MAX_SUBSCRIPTIONS`` jobs at once
(``too_many_subscriptions``), and a token bucket of ``EVENTS_WS_SUBSCRIBE_BURST`` subscribes
refilled at ``EVENTS_WS_SUBSCRIBE_RATE`` per second (``rate_limited`` with ``retry_after``), since
each subscribe may replay up to ``EVENTS_WS_MAX_REPLAY`` events.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from apps.events import kinds, metrics, selectors
from apps.events.auth import socket_access
from apps.events.broadcast import JOBS_GROUP
from apps.events.fanout import hub

log = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_ACCESS_REVOKED = 4403
# Reports that may be merged into a ``coalesced`` frame when a socket is behind: many ranks' fault
# reports and repeated warnings. Everything else changes what MindCluster does or what the job is,
# and is always sent as its own frame.
COALESCIBLE_KINDS = frozenset({kinds.FAULT_DETECTED, kinds.JOB_WARNING})
REPAIR = "repair"  # an inbox item from the hub's check: fill the job's stream from the database


def _db(fn: Any) -> Any:
    """Reads in the thread pool, not the one thread-sensitive thread: sockets must not queue behind
    each other's catch-up queries (each call closes stale connections before and after)."""
    return database_sync_to_async(fn, thread_sensitive=False)


@dataclass
class Subscription:
    """One job a socket follows: the last seq it was sent."""

    job_id: int
    last_sent: int
    checked_head: int = 0  # the stored head at the previous check


class EventsConsumer(AsyncJsonWebsocketConsumer):
    """Authenticates, subscribes, forwards; all reads go through ``apps.events.selectors``."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            # Closing before accept refuses the handshake (HTTP 403): no socket for anonymous users.
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.user = user
        self.subs: dict[int, Subscription] = {}
        self.lock = asyncio.Lock()
        self.all_jobs = False
        self.visible: set[int] = set()
        self.pending_summaries: dict[int, dict[str, Any]] = {}
        self.max_replay = int(settings.EVENTS_WS_MAX_REPLAY)
        self.max_lag_ns = int(settings.EVENTS_WS_MAX_LAG_SECONDS * 1e9)
        self.coalesce_after = int(settings.EVENTS_WS_COALESCE_AFTER)
        self.event_frames = metrics.FRAMES_SENT.labels(type="event")
        # What the socket was opened with, rechecked by _access_loop.
        token_id = self.scope.get("auth_token_id")
        self.token_id: int | None = token_id if isinstance(token_id, int) else None
        session = self.scope.get("session") if self.token_id is None else None
        self.session_key: str | None = getattr(session, "session_key", None) if session is not None else None
        self.max_subscriptions = int(settings.EVENTS_WS_MAX_SUBSCRIPTIONS)
        self.subscribe_burst = float(settings.EVENTS_WS_SUBSCRIBE_BURST)
        self.subscribe_rate = float(settings.EVENTS_WS_SUBSCRIBE_RATE)
        self.subscribe_tokens = self.subscribe_burst
        self.subscribe_checked = time.monotonic()
        self.tasks: list[asyncio.Task[None]] = []
        self.inbox: deque[dict[str, Any]] = deque()  # live frames from the hub, oldest first
        self.woken = asyncio.Event()
        await self.accept()
        metrics.OPEN_SOCKETS.inc()
        self.opened = True
        self.tasks.append(asyncio.ensure_future(self._drain_loop()))
        self.tasks.append(asyncio.ensure_future(self._check_loop()))
        self.tasks.append(asyncio.ensure_future(self._summary_loop()))
        self.tasks.append(asyncio.ensure_future(self._access_loop()))

    async def disconnect(self, code: int) -> None:
        if not getattr(self, "opened", False):
            return
        self.opened = False
        metrics.OPEN_SOCKETS.dec()
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:  # the access check closes the socket from its own task
                task.cancel()
        for job_id in list(self.subs):
            await hub().unfollow(job_id, self)
        if self.all_jobs:
            with contextlib.suppress(Exception):  # Redis may be the reason we are closing
                await self.channel_layer.group_discard(JOBS_GROUP, self.channel_name)

    # --- client messages --------------------------------------------------------------------------
    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        """Parse JSON ourselves: a malformed frame gets an error frame, not a dropped connection."""
        try:
            content = json.loads(text_data if text_data is not None else (bytes_data or b"").decode())
        except (ValueError, UnicodeDecodeError):
            await self._error("frames must be JSON text")
            return
        await self.receive_json(content)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict) or len(content) != 1:
            await self._error("expected one of {'subscribe': ...} or {'unsubscribe': ...}")
            return
        verb, body = next(iter(content.items()))
        if verb not in ("subscribe", "unsubscribe") or not isinstance(body, dict):
            await self._error(
                f"unknown message {verb!r}; expected 'subscribe' or 'unsubscribe' with an object"
            )
            return
        if verb == "subscribe" and not await self._may_subscribe():
            return
        if body.get("jobs") == "all":
            await (self._subscribe_all() if verb == "subscribe" else self._unsubscribe_all())
            return
        job_id = body.get("job")
        if not isinstance(job_id, int) or isinstance(job_id, bool) or job_id <= 0:
            await self._error("'job' must be a positive integer job id", field="job")
            return
        if verb == "unsubscribe":
            await self._unsubscribe(job_id)
            return
        after_seq = body.get("after_seq", 0)
        if not isinstance(after_seq, int) or isinstance(after_seq, bool) or after_seq < 0:
            await self._error("'after_seq' must be an integer ≥ 0", field="after_seq", job=job_id)
            return
        if job_id not in self.subs and len(self.subs) >= self.max_subscriptions:
            await self._error(
                f"this socket already follows {self.max_subscriptions} jobs, the most it may; "
                "unsubscribe from one first, or use {'subscribe': {'jobs': 'all'}} for summaries",
                code="too_many_subscriptions",
                job=job_id,
                limit=self.max_subscriptions,
            )
            return
        await self._subscribe(job_id, after_seq)

    async def _may_subscribe(self) -> bool:
        """A token bucket per socket: each subscribe may replay up to EVENTS_WS_MAX_REPLAY events."""
        now = time.monotonic()
        self.subscribe_tokens = min(
            self.subscribe_burst,
            self.subscribe_tokens + (now - self.subscribe_checked) * self.subscribe_rate,
        )
        self.subscribe_checked = now
        if self.subscribe_tokens >= 1:
            self.subscribe_tokens -= 1
            return True
        wait = (1 - self.subscribe_tokens) / self.subscribe_rate if self.subscribe_rate > 0 else 60.0
        await self._error(
            "too many subscribe messages on this socket; wait and try again",
            code="rate_limited",
            retry_after=round(wait, 2),
        )
        return False

    async def _error(self, message: str, **extra: Any) -> None:
        await self._send({"type": "error", "error": message, **extra})

    async def _send_text(self, text: str) -> None:
        """The hot path: an event frame encoded once by the broadcaster, sent to this socket as is."""
        if not getattr(self, "opened", False):
            return
        try:
            await self.send(text_data=text)
        except RuntimeError:
            self.opened = False
            return
        self.event_frames.inc()

    async def _send(self, frame: dict[str, Any]) -> None:
        if not getattr(self, "opened", False):
            return  # the socket closed while a handler or a background task was still running
        try:
            await self.send_json(frame)
        except RuntimeError:  # the server already sent the close: nothing more to say
            self.opened = False
            return
        metrics.FRAMES_SENT.labels(type=frame.get("type", "?")).inc()

    # --- per-job stream ---------------------------------------------------------------------------
    async def _subscribe(self, job_id: int, after_seq: int) -> None:
        if not await _db(selectors.job_visible)(self.user, job_id):
            # The same answer for "does not exist" and "not yours", like the REST API's 404.
            await self._error("job not found", code="not_found", job=job_id)
            return
        async with self.lock:
            await hub().follow(job_id, self)  # join first ...
            sub = self.subs.get(job_id) or Subscription(job_id, after_seq)
            sub.last_sent = after_seq
            self.subs[job_id] = sub
            await self._catch_up(sub)  # ... then replay: frames stored meanwhile wait in the inbox

    async def _unsubscribe(self, job_id: int) -> None:
        async with self.lock:
            if self.subs.pop(job_id, None) is not None:
                await hub().unfollow(job_id, self)

    async def _catch_up(self, sub: Subscription) -> None:
        """Send every stored event after ``sub.last_sent``, or ``resync`` when that is too many."""
        head = (await _db(selectors.head_seqs)([sub.job_id])).get(sub.job_id, 0)
        if head - sub.last_sent > self.max_replay:  # decided on one cheap aggregate, not 1,000 rows
            await self._resync(sub, head)
            return
        rows = await _db(selectors.events_after)(sub.job_id, sub.last_sent, self.max_replay)
        for frame in rows:
            await self._send(frame)
            sub.last_sent = frame["seq"]

    async def _resync(self, sub: Subscription, head: int | None = None) -> None:
        """Tell the client to page over REST from ``last_sent``; stop streaming this job to it."""
        if head is None:
            head = (await _db(selectors.head_seqs)([sub.job_id])).get(sub.job_id, 0)
        self.subs.pop(sub.job_id, None)
        await hub().unfollow(sub.job_id, self)
        await self._send({"type": "resync", "job": sub.job_id, "from_seq": sub.last_sent, "to_seq": head})

    # --- live frames from the hub ------------------------------------------------------------------
    def wake(self) -> None:
        """Called by the hub after appending to ``inbox``: the drain task takes it from here."""
        self.woken.set()

    async def _drain_loop(self) -> None:
        """Send what the hub queued, in order; one wake-up can carry many frames under load."""
        while True:
            await self.woken.wait()
            self.woken.clear()
            while self.inbox:
                async with self.lock:  # not while a subscribe or catch-up replays from the database
                    while self.inbox:
                        batch = list(self.inbox)
                        self.inbox.clear()
                        try:
                            if len(batch) >= self.coalesce_after:
                                await self._deliver_coalesced(batch)
                            else:
                                for message in batch:
                                    await self._deliver(message)
                        except asyncio.CancelledError:
                            raise
                        except Exception as exc:  # the database is briefly away: the check repairs
                            log.info("websocket delivery failed: %s", exc.__class__.__name__)

    async def _deliver_coalesced(self, batch: list[dict[str, Any]]) -> None:
        """A backlog: runs of consecutive report events of one job go out as one ``coalesced`` frame.

        Only ``COALESCIBLE_KINDS`` are merged; every other event (strategy, outcome, phase,
        decision, policy...) is sent as itself, in order, so no state change is ever hidden.
        The frame names the exact seq range, so the client's seq stays gap-free and it can
        page the details over REST (``after_seq=from_seq - 1``).
        """
        runs: dict[int, list[dict[str, Any]]] = {}  # job -> the run being built (frame metadata)

        async def flush(job_id: int) -> None:
            run = runs.pop(job_id, None)
            sub = self.subs.get(job_id)
            if not run or sub is None:
                return
            if len(run) == 1:
                await self._send_text(run[0]["text"])
            else:
                counts = Counter(message["frame"]["kind"] for message in run)
                first, last = run[0]["frame"]["seq"], run[-1]["frame"]["seq"]
                frame = {"type": "coalesced", "job": job_id, "from_seq": first, "to_seq": last}
                await self._send({**frame, "count": len(run), "kinds": dict(counts)})
            sub.last_sent = run[-1]["frame"]["seq"]

        for message in batch:
            if message.get("type") == REPAIR:
                await flush(message["job"])
                await self._deliver(message)
                continue
            meta = message["frame"]
            job_id, seq = meta["job"], meta["seq"]
            sub = self.subs.get(job_id)
            if sub is None:
                continue
            run = runs.get(job_id)
            expected = (run[-1]["frame"]["seq"] if run else sub.last_sent) + 1
            if meta.get("kind") in COALESCIBLE_KINDS and seq == expected and message.get("text"):
                runs.setdefault(job_id, []).append(message)
                continue
            await flush(job_id)
            await self._deliver(message)
        for job_id in list(runs):
            await flush(job_id)

    def check_head(self, job_id: int, head: int) -> None:
        """The hub's periodic check: ``head`` is the job's stored head seq now.

        Only what was stored before the previous check and is still unsent counts as lost (newer
        events are most likely still on their way): that is repaired from the database by the
        drain task, in order with the live frames.
        """
        sub = self.subs.get(job_id)
        if sub is None:
            return
        overdue, sub.checked_head = sub.checked_head, head
        if sub.last_sent < overdue:
            self.inbox.append({"type": REPAIR, "job": job_id, "upto": overdue})
            self.wake()

    async def _deliver(self, message: dict[str, Any]) -> None:
        """One live frame (``text`` is the frame already encoded once by the broadcaster); lock held."""
        if message.get("type") == REPAIR:
            sub = self.subs.get(message["job"])
            if sub is not None and sub.last_sent < message["upto"]:
                metrics.GAPS_FILLED.inc(message["upto"] - sub.last_sent)
                await self._catch_up(sub)
            return
        frame = message["frame"]
        sub = self.subs.get(frame["job"])
        if sub is None:
            return
        seq = frame["seq"]
        if seq <= sub.last_sent:
            return  # replayed already, or a duplicate
        sent_ns = message.get("sent_ns")
        if sent_ns and time.time_ns() - sent_ns > self.max_lag_ns:
            # This socket is too far behind to catch up frame by frame: drop its backlog (the
            # events are stored) and let the client page over REST, instead of queueing more.
            await self._resync(sub)
            return
        if seq == sub.last_sent + 1:
            await self._send_text(message.get("text") or json.dumps(frame))
            sub.last_sent = seq
            return
        metrics.GAPS_FILLED.inc(seq - sub.last_sent - 1)
        await self._catch_up(sub)

    # --- jobs summary stream ----------------------------------------------------------------------
    async def _subscribe_all(self) -> None:
        self.visible = await _db(selectors.visible_job_ids)(self.user)
        await self.channel_layer.group_add(JOBS_GROUP, self.channel_name)
        self.all_jobs = True

    async def _unsubscribe_all(self) -> None:
        self.all_jobs = False
        self.pending_summaries.clear()
        await self.channel_layer.group_discard(JOBS_GROUP, self.channel_name)

    async def events_summary(self, message: dict[str, Any]) -> None:
        frame = message["frame"]
        if self.all_jobs and frame["job"] in self.visible:
            self.pending_summaries[frame["job"]] = frame  # coalesced: the newest summary wins

    async def _summary_loop(self) -> None:
        interval = settings.EVENTS_WS_SUMMARY_SECONDS
        while True:
            await asyncio.sleep(interval)
            if self.pending_summaries:
                frames, self.pending_summaries = self.pending_summaries, {}
                for frame in frames.values():
                    await self._send(frame)

    # --- safety net -------------------------------------------------------------------------------
    async def _check_loop(self) -> None:
        """Every few seconds (jittered, so sockets opened together do not query together)."""
        interval = settings.EVENTS_WS_CHECK_SECONDS
        while True:
            await asyncio.sleep(interval * random.uniform(0.75, 1.25))
            try:
                await self._check_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis or the database is briefly away: try again next round
                log.info("websocket check failed: %s", exc.__class__.__name__)

    async def _access_loop(self) -> None:
        """Recheck what the socket was opened with (issue #16); see the module docstring."""
        interval = settings.EVENTS_WS_ACCESS_CHECK_SECONDS
        while getattr(self, "opened", False):
            await asyncio.sleep(interval * random.uniform(0.8, 1.0))
            try:
                if not await self._check_access():
                    return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database is briefly away: check again next round
                log.info("websocket access check failed: %s", exc.__class__.__name__)

    async def _check_access(self) -> bool:
        """False when the socket was closed for good."""
        access = await _db(socket_access)(
            user_id=self.user.pk,
            token_id=self.token_id,
            session_key=self.session_key,
            job_ids=list(self.subs),
        )
        if not access.allowed:
            await self._error(f"access ended: {access.reason}", code="access_revoked")
            await self.close(code=CLOSE_ACCESS_REVOKED)
            await self.disconnect(CLOSE_ACCESS_REVOKED)
            return False
        self.user = access.user  # fresh roles and flags for the next subscribe
        async with self.lock:
            for job_id in [job_id for job_id in self.subs if job_id not in access.visible]:
                self.subs.pop(job_id, None)
                await hub().unfollow(job_id, self)
                await self._error(
                    "you may no longer see this job; its events stopped", code="access_revoked", job=job_id
                )
        return True

    async def _check_once(self) -> None:
        # Per-job streams are checked by the process's hub (one query for all sockets); this
        # socket only keeps its jobs-summary subscription and its visible jobs fresh.
        if self.all_jobs:
            await self.channel_layer.group_add(JOBS_GROUP, self.channel_name)
            self.visible = await _db(selectors.visible_job_ids)(self.user)

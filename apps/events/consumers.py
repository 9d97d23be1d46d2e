"""``/ws/events/`` (design.md §4.3): the socket around ``apps.events.stream``.

Client → server: ``{"subscribe": {"job": id, "after_seq": n}}``, ``{"subscribe": {"jobs": "all"}}``,
``{"unsubscribe": {"job": id}}`` / ``{"unsubscribe": {"jobs": "all"}}`` (``apps.events.client_messages``).
Server → client: ``{"type": "event", "job", "seq", ...}``, ``{"type": "job", ...}`` summaries,
``{"type": "resync", "job", "from_seq", "to_seq"}``, ``{"type": "error", "error", ...}``, and, for a
socket that has fallen behind, ``{"type": "coalesced", "job", "from_seq", "to_seq", "count", "kinds"}``:
that many fault reports / warnings (seqs ``from_seq``..``to_seq``, all stored) in one frame. Replay,
live frames, gap repair, coalescing and resync are ``apps.events.stream.JobStreams``; this module
authenticates, checks access, joins and leaves groups, and sends and receives.

Live frames reach a socket through its process's ``FanoutHub`` (``apps.events.fanout``), which joins
``job-<id>`` once per process and appends each frame to the inbox of every local follower; the
socket's own drain task sends them.

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
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from apps.events import metrics, selectors
from apps.events.auth import socket_access
from apps.events.broadcast import JOBS_GROUP
from apps.events.client_messages import (
    FollowAllJobs,
    FollowJob,
    Invalid,
    SubscribeBucket,
    UnfollowAllJobs,
    UnfollowJob,
    read_message,
)
from apps.events.fanout import hub
from apps.events.stream import FrameSink, JobStreams, StreamLimits, Summaries

log = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_ACCESS_REVOKED = 4403


def _db(fn: Any) -> Any:
    """Reads in the thread pool, not the one thread-sensitive thread: sockets must not queue behind
    each other's catch-up queries (each call closes stale connections before and after)."""
    return database_sync_to_async(fn, thread_sensitive=False)


class StoredEvents:
    """``apps.events.stream.EventLog`` over ``apps.events.selectors``."""

    async def head_seq(self, job_id: int) -> int:
        heads: dict[int, int] = await _db(selectors.head_seqs)([job_id])
        return heads.get(job_id, 0)

    async def events_after(self, job_id: int, after_seq: int, limit: int) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = await _db(selectors.events_after)(job_id, after_seq, limit)
        return rows


def stream_limits() -> StreamLimits:
    return StreamLimits(
        max_replay=int(settings.EVENTS_WS_MAX_REPLAY),
        max_lag_ns=int(settings.EVENTS_WS_MAX_LAG_SECONDS * 1e9),
        coalesce_after=int(settings.EVENTS_WS_COALESCE_AFTER),
    )


class EventsConsumer(AsyncJsonWebsocketConsumer):
    """Authenticates, reads client messages, forwards; the streams are ``JobStreams`` and ``Summaries``."""

    opened = False  # accepted and not yet closed: background tasks check it before sending

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            # Closing before accept refuses the handshake (HTTP 403): no socket for anonymous users.
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.user = user
        sink = FrameSink(text=self._send_text, frame=self._send)
        self.streams = JobStreams(StoredEvents(), sink, hub(), stream_limits())
        self.summaries = Summaries(sink)
        self.event_frames = metrics.FRAMES_SENT.labels(type="event")
        self.event_frames_uncounted = 0  # sent, not yet added to event_frames (once per tick)
        # The server's ASGI send (its stub's union of every ASGI event does not take a plain dict).
        self.asgi_send: Callable[[dict[str, Any]], Awaitable[None]] = cast(Any, self.base_send)
        # What the socket was opened with, rechecked by _access_loop.
        token_id = self.scope.get("auth_token_id")
        self.token_id: int | None = token_id if isinstance(token_id, int) else None
        session = self.scope.get("session") if self.token_id is None else None
        self.session_key: str | None = getattr(session, "session_key", None) if session is not None else None
        self.max_subscriptions = int(settings.EVENTS_WS_MAX_SUBSCRIPTIONS)
        self.subscribe_bucket = SubscribeBucket(
            float(settings.EVENTS_WS_SUBSCRIBE_BURST), float(settings.EVENTS_WS_SUBSCRIBE_RATE)
        )
        self.tasks: list[asyncio.Task[None]] = []
        await self.accept()
        metrics.OPEN_SOCKETS.inc()
        self.opened = True
        drain = asyncio.ensure_future(self.streams.drain_forever())
        drain.add_done_callback(self._drain_ended)
        self.tasks.append(drain)
        self.tasks.append(asyncio.ensure_future(self._check_loop()))
        self.tasks.append(asyncio.ensure_future(self._tick_loop()))
        self.tasks.append(asyncio.ensure_future(self._access_loop()))

    def _drain_ended(self, task: asyncio.Task[None]) -> None:
        """The drain task only ends when the socket closes (cancelled); if it died, say so loudly:
        the socket would stay open and silent."""
        if not task.cancelled() and task.exception() is not None:
            log.error("websocket drain task died", exc_info=task.exception())

    async def disconnect(self, code: int) -> None:
        if not self.opened:
            return
        self.opened = False
        metrics.OPEN_SOCKETS.dec()
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:  # the access check closes the socket from its own task
                task.cancel()
        await self.streams.close()
        self._count_sent()
        if self.summaries.following:
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
        message = read_message(content)
        if message.subscribes and (wait := self.subscribe_bucket.take()) is not None:
            await self._error(
                "too many subscribe messages on this socket; wait and try again",
                code="rate_limited",
                retry_after=round(wait, 2),
            )
            return
        match message.request:
            case Invalid(error=error, details=details):
                await self._error(error, **details)
            case FollowAllJobs():
                visible = await _db(selectors.visible_job_ids)(self.user)
                await self.channel_layer.group_add(JOBS_GROUP, self.channel_name)
                self.summaries.start(visible)
            case UnfollowAllJobs():
                self.summaries.stop()
                await self.channel_layer.group_discard(JOBS_GROUP, self.channel_name)
            case UnfollowJob(job_id=job_id):
                await self.streams.unsubscribe(job_id)
            case FollowJob(job_id=job_id, after_seq=after_seq):
                await self._subscribe(job_id, after_seq)

    async def _subscribe(self, job_id: int, after_seq: int) -> None:
        if not self.streams.follows(job_id) and len(self.streams.jobs) >= self.max_subscriptions:
            await self._error(
                f"this socket already follows {self.max_subscriptions} jobs, the most it may; "
                "unsubscribe from one first, or use {'subscribe': {'jobs': 'all'}} for summaries",
                code="too_many_subscriptions",
                job=job_id,
                limit=self.max_subscriptions,
            )
            return
        if not await _db(selectors.job_visible)(self.user, job_id):
            # The same answer for "does not exist" and "not yours", like the REST API's 404.
            await self._error("job not found", code="not_found", job=job_id)
            return
        await self.streams.subscribe(job_id, after_seq)

    async def _error(self, message: str, **extra: Any) -> None:
        await self._send({"type": "error", "error": message, **extra})

    # --- the streams' FrameSink -------------------------------------------------------------------
    async def _send_text(self, text: str) -> None:
        """The hot path: an event frame encoded once by the broadcaster, sent to this socket as is.

        Straight to the server's ASGI ``send``, without ``AsyncWebsocketConsumer.send`` and
        ``AsyncConsumer.send`` in between (two coroutines per frame per socket that only build
        this dict), and counted once per tick (``_tick_loop``), not per frame.
        """
        if not self.opened:
            return
        try:
            await self.asgi_send({"type": "websocket.send", "text": text})
        except (RuntimeError, OSError):  # closed (uvicorn's ClientDisconnected is an OSError)
            self.opened = False
            return
        self.event_frames_uncounted += 1

    def _count_sent(self) -> None:
        if self.event_frames_uncounted:
            self.event_frames.inc(self.event_frames_uncounted)
            self.event_frames_uncounted = 0

    async def _send(self, frame: Mapping[str, Any]) -> None:
        if not self.opened:
            return  # the socket closed while a handler or a background task was still running
        try:
            await self.send_json(frame)
        except RuntimeError:  # the server already sent the close: nothing more to say
            self.opened = False
            return
        metrics.FRAMES_SENT.labels(type=frame.get("type", "?")).inc()

    # --- jobs summary stream ----------------------------------------------------------------------
    async def events_summary(self, message: dict[str, Any]) -> None:
        self.summaries.offer(message["frame"])

    async def _tick_loop(self) -> None:
        """Every ``EVENTS_WS_SUMMARY_SECONDS``: the jobs summaries, and the event frames sent since the
        last tick added to the Prometheus counter (its ``inc`` takes a lock: 0.4 us a frame per
        socket when done per frame, nearly a fifth of the stream's own cost on the hot path)."""
        interval = settings.EVENTS_WS_SUMMARY_SECONDS
        while True:
            await asyncio.sleep(interval)
            self._count_sent()
            await self.summaries.flush()

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
        while self.opened:
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
        checked = self.streams.jobs  # a subscribe may land while the database is asked
        access = await _db(socket_access)(
            user_id=self.user.pk,
            token_id=self.token_id,
            session_key=self.session_key,
            job_ids=checked,
        )
        if not access.allowed:
            await self._error(f"access ended: {access.reason}", code="access_revoked")
            await self.close(code=CLOSE_ACCESS_REVOKED)
            await self.disconnect(CLOSE_ACCESS_REVOKED)
            return False
        self.user = access.user  # fresh roles and flags for the next subscribe
        for job_id in await self.streams.keep_only(access.visible, checked=set(checked)):
            await self._error(
                "you may no longer see this job; its events stopped", code="access_revoked", job=job_id
            )
        return True

    async def _check_once(self) -> None:
        # Per-job streams are checked by the process's hub (one query for all sockets); this
        # socket only keeps its jobs-summary subscription and its visible jobs fresh.
        if self.summaries.following:
            await self.channel_layer.group_add(JOBS_GROUP, self.channel_name)
            self.summaries.refresh(await _db(selectors.visible_job_ids)(self.user))

"""Per-process fan-out of live event frames: one channel-layer receiver per process, not one per socket.

With Channels' usual pattern every socket joins ``job-<id>`` itself, and each frame then costs every
socket a trip through its channel queue, a new receive task and an ``asyncio.wait`` before the
handler runs: at 100 sockets x 200 events/s that is 20,000 dispatches a second, more than one
Python process can do (bench/bench_events.py measured seconds of lag). Here one ``FanoutHub`` per
event loop joins ``job-<id>`` once, on behalf of all its sockets that follow the job, receives each
frame once, and appends it to those sockets' in-memory inboxes; each socket drains its own inbox
in its own task, so a slow browser delays only itself. Ordering and the no-gap / no-duplicate rules
stay with each socket's ``apps.events.stream.JobStreams``, the subscriber here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from typing import Any, Protocol, cast

from channels.layers import get_channel_layer
from django.core.exceptions import ImproperlyConfigured

from apps.events.broadcast import job_group

log = logging.getLogger(__name__)

RECEIVE_RETRY_SECONDS = 0.5
INBOX_LIMIT = 10_000  # frames queued for one socket; about 50 s of a 200 events/s job


class Subscriber(Protocol):
    """What the hub needs of a socket: an inbox, a way to wake its drainer, and the periodic check."""

    inbox: deque[dict[str, Any]]

    def wake(self) -> None: ...

    def check_head(self, job_id: int, head: int) -> None: ...


class ChannelLayer(Protocol):
    """The part of a channel layer the hub uses."""

    async def new_channel(self, prefix: str = ...) -> str: ...

    async def group_add(self, group: str, channel: str) -> None: ...

    async def group_discard(self, group: str, channel: str) -> None: ...

    async def receive(self, channel: str) -> dict[str, Any]: ...


def _channel_layer() -> ChannelLayer:
    layer = get_channel_layer()
    if layer is None:
        raise ImproperlyConfigured("CHANNEL_LAYERS has no default layer; live events need one")
    # Both layers we run (channels_redis, and the in-memory one) take a channel-name prefix;
    # the stub of their base class does not declare it.
    return cast("ChannelLayer", layer)


class FanoutHub:
    """Joins each followed job's group once per process and hands every frame to the local followers."""

    def __init__(self) -> None:
        self.layer = _channel_layer()
        self.channel: str | None = None
        self.followers: dict[int, set[Subscriber]] = {}
        self.receiver: asyncio.Task[None] | None = None
        self.checker: asyncio.Task[None] | None = None
        self.setup_lock = asyncio.Lock()

    async def _ensure_channel(self) -> str:
        async with self.setup_lock:
            if self.channel is None:
                self.channel = await self.layer.new_channel("events-hub.")
                self.receiver = asyncio.ensure_future(self._receive_loop())
                self.checker = asyncio.ensure_future(self._check_loop())
            return self.channel

    async def follow(self, job_id: int, subscriber: Subscriber) -> None:
        """Start handing ``job_id``'s frames to ``subscriber`` (joins the group first if needed).

        Returns once the group is joined, so a caller that reads the database afterwards cannot
        miss a frame stored in between: it will be in the inbox.
        """
        channel = await self._ensure_channel()
        followers = self.followers.setdefault(job_id, set())
        followers.add(subscriber)
        # Also when already followed: re-joining is idempotent, and after a Redis restart it is
        # what restores the subscription (the consumers' periodic check calls this again).
        await self.layer.group_add(job_group(job_id), channel)

    async def unfollow(self, job_id: int, subscriber: Subscriber) -> None:
        followers = self.followers.get(job_id)
        if not followers:
            return
        followers.discard(subscriber)
        if not followers:
            del self.followers[job_id]
            if self.channel is not None:
                with contextlib.suppress(Exception):  # Redis may be away; the group expires anyway
                    await self.layer.group_discard(job_group(job_id), self.channel)

    def deliver(self, message: dict[str, Any]) -> None:
        """Append one frame to the inbox of every local follower of its job and wake them."""
        job = (message.get("frame") or {}).get("job")
        for subscriber in tuple(self.followers.get(job, ()) if isinstance(job, int) else ()):
            if len(subscriber.inbox) >= INBOX_LIMIT:
                # A socket that stopped reading: drop (its consumer finds the gap against the
                # database and answers with a resync) rather than grow without bound.
                continue
            subscriber.inbox.append(message)
            subscriber.wake()

    async def _receive_loop(self) -> None:
        assert self.channel is not None
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis restarting: consumers refill any gap from the database
                log.info("events hub receive failed: %s", exc.__class__.__name__)
                await asyncio.sleep(RECEIVE_RETRY_SECONDS)
                continue
            if message.get("type") == "events.event":
                self.deliver(message)

    async def _check_loop(self) -> None:
        """The safety net, once per process rather than once per socket: every few seconds re-join
        the groups (a restarted Redis forgot the subscriptions) and read the stored head seq of
        every followed job in one query; each follower compares it with what it sent."""
        from django.conf import settings

        interval = settings.EVENTS_WS_CHECK_SECONDS
        while True:
            await asyncio.sleep(interval)
            try:
                await self.check_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis or the database is briefly away: next round
                log.info("events hub check failed: %s", exc.__class__.__name__)

    async def check_once(self) -> None:
        from channels.db import database_sync_to_async

        from apps.events import selectors

        jobs = [job_id for job_id, followers in self.followers.items() if followers]
        if not jobs or self.channel is None:
            return
        for job_id in jobs:
            await self.layer.group_add(job_group(job_id), self.channel)
        heads = await database_sync_to_async(selectors.head_seqs, thread_sensitive=False)(jobs)
        for job_id, head in heads.items():
            for subscriber in tuple(self.followers.get(job_id, ())):
                subscriber.check_head(job_id, head)


_hubs: dict[asyncio.AbstractEventLoop, FanoutHub] = {}


def hub() -> FanoutHub:
    """The hub of the running event loop (one per server process; tests may run several loops)."""
    loop = asyncio.get_running_loop()
    found = _hubs.get(loop)
    if found is None:
        for stale in [other for other in _hubs if other.is_closed()]:
            del _hubs[stale]
        found = _hubs[loop] = FanoutHub()
    return found

"""Watch streams: per-watcher filtering, bounded buffering and the chunked writer loop.

Fan-out happens synchronously inside :meth:`Store.commit` on the event loop: each watcher filters
the change (namespace, label and field selectors, evaluated against both the old and new object so
that an object leaving a selector is delivered as DELETED and one entering it as ADDED, like the
apiserver's cacher) and appends the change's cached serialized line to its queue - every watcher
shares the same bytes.

Slow consumers: each watcher buffers at most ``queue_limit`` events. On overflow the buffer is
dropped and the stream ends with an ``ERROR`` event carrying a 410 Expired ``Status``; the official
client's ``Watch`` then raises ``ApiException(410)`` (or re-watches once), and informer-style code
relists. Memory per watcher is therefore bounded.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from . import errors
from .resources import ResourceType
from .selectors import FieldSelector, LabelSelector
from .store import ADDED, DELETED, MODIFIED, Change, Store, dumps

_CHUNK = 256 * 1024


def error_line(err: errors.ApiError) -> bytes:
    return dumps({"type": "ERROR", "object": err.status()}) + b"\n"


@dataclass(eq=False)  # eq=False: watchers are told apart by identity (a set of them per type)
class Watcher:
    rt: ResourceType
    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    queue_limit: int
    queue: deque[bytes] = field(default_factory=deque, init=False)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    overflowed: bool = field(default=False, init=False)
    closed: bool = field(default=False, init=False)
    # Rewrites each event line, e.g. into a server-side printed Table (kubectl get -w).
    transform: Callable[[bytes], bytes] | None = field(default=None, init=False)

    def render(self, line: bytes) -> bytes:
        return self.transform(line) if self.transform is not None else line

    def matches(self, obj: dict[str, Any]) -> bool:
        if not self.labels.empty and not self.labels.matches(obj["metadata"].get("labels")):
            return False
        return self.fields.empty or self.fields.matches(obj)

    def event_type(self, change: Change) -> str | None:
        """The event type this watcher sees for ``change``, or None when it is out of scope."""
        if self.namespace is not None and change.namespace != self.namespace:
            return None
        new_ok = change.type != DELETED and self.matches(change.obj.obj)
        old_ok = change.prev is not None and self.matches(change.prev.obj)
        if new_ok:
            return MODIFIED if old_ok else ADDED
        return DELETED if old_ok else None

    def offer(self, change: Change) -> None:
        etype = self.event_type(change)
        if etype is not None:
            self.push(self.render(change.line(etype)))

    def push(self, line: bytes) -> None:
        if self.overflowed or self.closed:
            return
        if len(self.queue) >= self.queue_limit:
            self.overflowed = True
            self.queue.clear()  # free the backlog now; the stream ends with 410
        else:
            self.queue.append(line)
        self.wakeup.set()

    def close(self) -> None:
        self.closed = True
        self.wakeup.set()


def bookmark_line(rt: ResourceType, rv: int) -> bytes:
    obj = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"resourceVersion": str(rv)}}
    return dumps({"type": "BOOKMARK", "object": obj}) + b"\n"


async def run_watch(
    request: web.Request,
    resp: web.StreamResponse,
    watcher: Watcher,
    store: Store,
    initial: list[bytes],
    timeout_s: float | None,
    bookmark_interval: float | None,
) -> None:
    """Write ``initial`` then live events until timeout, overflow, shutdown or client disconnect."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s if timeout_s is not None else None

    def bookmark_after(now: float) -> float | None:
        # kube-apiserver's cacheWatcher.nextBookmarkTime (staging/src/k8s.io/apiserver/pkg/storage/
        # cacher/cache_watcher.go): every bookmarkFrequency (a minute), and 2 s before the watch's
        # deadline; none once that moment has passed.
        if not bookmark_interval:
            return None
        at = now + bookmark_interval
        if deadline is not None:
            at = min(at, deadline - 2.0)
        return at if at >= now else None

    next_bookmark = bookmark_after(loop.time())
    try:
        # Initial events are written in large chunks without passing through the bounded queue.
        buf: list[bytes] = []
        size = 0
        for line in initial:
            buf.append(line)
            size += len(line)
            if size >= _CHUNK:
                await resp.write(b"".join(buf))
                buf, size = [], 0
        if buf:
            await resp.write(b"".join(buf))
        while not watcher.closed:
            watcher.wakeup.clear()
            if watcher.overflowed:
                await resp.write(
                    error_line(errors.expired("watch buffer overflowed: consumer too slow, relist"))
                )
                return
            if watcher.queue:
                batch = b"".join(watcher.queue)
                watcher.queue.clear()
                await resp.write(batch)
                continue
            now = loop.time()
            if deadline is not None and now >= deadline:
                return
            if next_bookmark is not None and now >= next_bookmark:
                # Queue is empty, so everything up to store.rv has been delivered to this watcher.
                await resp.write(bookmark_line(watcher.rt, store.rv))
                next_bookmark = bookmark_after(now + 1e-3)
                continue
            wait = 1.0
            if deadline is not None:
                wait = min(wait, deadline - now)
            if next_bookmark is not None:
                wait = min(wait, next_bookmark - now)
            try:
                await asyncio.wait_for(watcher.wakeup.wait(), timeout=max(wait, 0.0))
            except TimeoutError:
                transport = request.transport
                if transport is None or transport.is_closing():
                    return  # client went away while idle
    except (ConnectionError, RuntimeError):
        return  # client disconnected mid-write

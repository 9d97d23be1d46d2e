"""The hand-over between the ingester's watchers and its applier: a bounded queue and a sync gate."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable

from apps.ingest.items import Item


class Feed:
    """A term's bounded queue: a slow database slows the watches (back-pressure), never loses items."""

    def __init__(self, items: queue.Queue[Item], halt: threading.Event) -> None:
        self.items = items
        self.halt = halt  # the term's stop signal: a put gives up once it is set

    def put(self, item: Item) -> None:
        while not self.halt.is_set():
            try:
                self.items.put(item, timeout=0.5)
                return
            except queue.Full:
                continue

    def get(self, timeout: float) -> Item | None:
        try:
            return self.items.get(timeout=timeout)
        except queue.Empty:
            return None

    def get_nowait(self) -> Item | None:
        try:
            return self.items.get_nowait()
        except queue.Empty:
            return None

    def drain(self) -> None:
        """Drop what is queued (not stored, so not acknowledged by a cursor: the next leader replays it)."""
        while self.get_nowait() is not None:
            pass


class SyncGate:
    """The sources whose backlog has not started arriving yet: the applier waits for all of them,
    so the first items of a term can be put in order."""

    def __init__(self, sources: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._waiting = set(sources)

    def reset(self, sources: Iterable[str]) -> None:
        with self._lock:
            self._waiting = set(sources)

    def done(self, source: str) -> None:
        with self._lock:
            self._waiting.discard(source)

    @property
    def complete(self) -> bool:
        with self._lock:
            return not self._waiting

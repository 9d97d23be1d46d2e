"""In-process publish/subscribe between the simulated ClusterD and its gRPC streams."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any


class Subscription:
    """A subscriber's queue; ``get`` returns None on timeout so stream loops can check for shutdown."""

    def __init__(self, hub: Hub, topic: str) -> None:
        self.hub = hub
        self.topic = topic
        self.queue: queue.Queue[Any] = queue.Queue()

    def get(self, timeout: float = 0.5) -> Any:
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        self.hub.unsubscribe(self)


class Hub:
    """Topics of messages; a subscriber can atomically take a snapshot and start listening."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: dict[str, list[Subscription]] = {}

    def subscribe(self, topic: str, snapshot: Callable[[], list[Any]] | None = None) -> Subscription:
        """Subscribe to ``topic``; ``snapshot()`` runs under the hub lock so nothing is missed or doubled."""
        sub = Subscription(self, topic)
        with self._lock:
            for item in snapshot() if snapshot else []:
                sub.queue.put(item)
            self._subscribers.setdefault(topic, []).append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            subs = self._subscribers.get(sub.topic, [])
            if sub in subs:
                subs.remove(sub)

    def publish(self, topic: str, item: Any, update: Callable[[], None] | None = None) -> None:
        """Deliver ``item``; ``update()`` (a state change) runs under the same lock as snapshots."""
        with self._lock:
            if update is not None:
                update()
            for sub in self._subscribers.get(topic, []):
                sub.queue.put(item)

    def subscriber_count(self, topic: str) -> int:
        with self._lock:
            return len(self._subscribers.get(topic, []))

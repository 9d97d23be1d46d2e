"""The reorder buffer: items from several streams come out in the order the API server wrote them.

Each watch is its own HTTP stream read by its own thread, so under load one stream can reach us
seconds after another: a PodGroup change before the Event written just before it. The API
server's resourceVersion is one counter across resources (etcd's revision) and each stream is in
order, so every source has a *watermark* (its newest version, raised by watch events and
bookmarks): an item at version v is due once every source's watermark is at least v, and then
nothing older can still arrive. A ClusterD signal carries the server's version at its arrival and
sorts after the watch items of the same version. A source that stays silent (a server sending few
bookmarks) holds items at most ``hold`` seconds: then order is best effort, and the store's
de-duplication still holds.

Pure: no clock, no queue, no database; the applier passes ``now`` in.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field

from apps.core.numbers import is_ascii_digits
from apps.ingest.items import Item

MAX_HELD = 50_000  # items held at most; beyond it, order gives way to progress
_NO_MARK = -1.0


@dataclass(frozen=True, order=True)
class Held:
    """One held item, sorted by (position, signal after watch items, arrival order)."""

    position: float
    signal: bool
    seq: int
    arrived: float = field(compare=False)
    item: Item = field(compare=False)


def position_of(item: Item) -> float | None:
    """The item's numeric resourceVersion, or None when it has none (or it is not a number)."""
    if item.is_signal:
        raw = item.resource_version
    else:
        obj = item.obj if isinstance(item.obj, dict) else {}
        meta = obj.get("metadata") or {}
        raw = item.resource_version or str(meta.get("resourceVersion") or "")
    return float(raw) if is_ascii_digits(raw) else None


class ReorderBuffer:
    """Holds items until they are due; see the module's docstring."""

    def __init__(self, sources: Iterable[str], hold: float, limit: int = MAX_HELD) -> None:
        self.sources = frozenset(sources)
        self.hold = hold
        self.limit = limit
        self._heap: list[Held] = []
        self._marks: dict[str, float] = {}
        self._newest = 0.0
        self._seq = 0

    def __len__(self) -> int:
        return len(self._heap)

    @property
    def full(self) -> bool:
        return len(self._heap) > self.limit

    def add(self, item: Item, now: float) -> None:
        position = position_of(item)
        if position is not None and not item.is_signal:
            self._newest = max(self._newest, position)
            if item.resource_version:  # a listed object's version is not a stream position
                self._marks[item.source] = max(self._marks.get(item.source, _NO_MARK), position)
        self._seq += 1
        # An item without a version (a signal when the server could not say) sorts after the newest seen.
        order = position if position is not None else self._newest
        heapq.heappush(self._heap, Held(order, item.is_signal, self._seq, now, item))

    def low_watermark(self) -> float:
        """The version every source has delivered up to (-1 while one has delivered nothing)."""
        return min((self._marks.get(source, _NO_MARK) for source in self.sources), default=float("inf"))

    def oldest_arrival(self) -> float | None:
        """When the next item to come out arrived (None when empty)."""
        return self._heap[0].arrived if self._heap else None

    def due(self, now: float, stopping: bool = False) -> bool:
        """Whether the next item may come out: every source is past it, it waited long enough,
        the buffer is stopping (flush everything) or over its limit."""
        if not self._heap:
            return False
        head = self._heap[0]
        return (
            stopping or self.full or head.arrived + self.hold <= now or head.position <= self.low_watermark()
        )

    def pop(self) -> Item:
        return heapq.heappop(self._heap).item

"""The ingester's reorder buffer, alone: no threads, no queue, no database, time passed in."""

from __future__ import annotations

from datetime import UTC, datetime

from apps.ingest.items import BOOKMARK, CLUSTERD_SOURCE, SIGNAL, Item
from apps.ingest.reorder import ReorderBuffer, position_of

AT = datetime(2026, 1, 1, tzinfo=UTC)
EVENTS, PODGROUPS = "events:team", "podgroups:team"


def watched(source: str, rv: int, event_type: str = "MODIFIED") -> Item:
    obj = {"metadata": {"resourceVersion": str(rv)}}
    return Item(source, source.split(":")[0], event_type, obj, str(rv), AT)


def listed(source: str, rv: int) -> Item:
    return Item(source, source.split(":")[0], "ADDED", {"metadata": {"resourceVersion": str(rv)}}, "", AT)


def bookmark(source: str, rv: int) -> Item:
    return Item(source, source.split(":")[0], BOOKMARK, {}, str(rv), AT)


def signal(position: str) -> Item:
    return Item(CLUSTERD_SOURCE, CLUSTERD_SOURCE, SIGNAL, object(), position, AT)


def drain(buffer: ReorderBuffer, now: float, stopping: bool = False) -> list[str]:
    out = []
    while buffer.due(now, stopping):
        item = buffer.pop()
        out.append(f"{item.resource}@{item.resource_version or '-'}")
    return out


def test_an_item_waits_until_every_source_is_past_it() -> None:
    buffer = ReorderBuffer({EVENTS, PODGROUPS}, hold=30.0)
    buffer.add(watched(EVENTS, 12), now=0.0)
    assert not buffer.due(1.0), "the PodGroup stream has said nothing yet"
    buffer.add(watched(PODGROUPS, 11), now=1.0)
    assert drain(buffer, 1.0) == ["podgroups@11"]  # 12 still waits: PodGroups only reached 11
    buffer.add(bookmark(PODGROUPS, 20), now=1.5)
    # The bookmark itself waits for the Events stream to pass 20.
    assert drain(buffer, 1.5) == ["events@12"]


def test_a_signal_sorts_after_the_watch_items_of_its_version() -> None:
    buffer = ReorderBuffer({EVENTS, PODGROUPS}, hold=30.0)
    buffer.add(signal("14"), now=0.0)
    buffer.add(watched(EVENTS, 14), now=0.1)
    buffer.add(watched(EVENTS, 15), now=0.2)
    buffer.add(bookmark(PODGROUPS, 14), now=0.3)
    # 15 is due only once the PodGroup stream passes it.
    assert drain(buffer, 0.3) == ["events@14", "podgroups@14", "clusterd@14"]
    assert drain(buffer, 0.3, stopping=True) == ["events@15"]


def test_a_signal_without_a_version_sorts_after_the_newest_seen() -> None:
    buffer = ReorderBuffer({EVENTS}, hold=30.0)
    buffer.add(watched(EVENTS, 9), now=0.0)
    buffer.add(signal(""), now=0.1)
    buffer.add(watched(EVENTS, 8), now=0.2)
    assert drain(buffer, 0.3, stopping=True) == ["events@8", "events@9", "clusterd@-"]


def test_a_listed_object_does_not_raise_the_watermark() -> None:
    buffer = ReorderBuffer({EVENTS, PODGROUPS}, hold=30.0)
    buffer.add(bookmark(EVENTS, 50), now=0.0)
    buffer.add(listed(PODGROUPS, 40), now=0.0)
    assert buffer.low_watermark() == -1.0, "the PodGroup list's own version has not come yet"
    buffer.add(bookmark(PODGROUPS, 45), now=0.1)
    assert drain(buffer, 0.1) == ["podgroups@-", "podgroups@45"]


def test_the_hold_releases_an_item_a_silent_source_would_keep() -> None:
    buffer = ReorderBuffer({EVENTS, PODGROUPS}, hold=0.3)
    buffer.add(watched(EVENTS, 7), now=10.0)
    assert buffer.oldest_arrival() == 10.0
    assert not buffer.due(10.29)
    assert drain(buffer, 10.3) == ["events@7"]
    assert buffer.oldest_arrival() is None


def test_over_its_limit_order_gives_way_to_progress() -> None:
    buffer = ReorderBuffer({EVENTS, PODGROUPS}, hold=30.0, limit=2)
    for rv in (3, 2, 1):
        buffer.add(watched(EVENTS, rv), now=0.0)
    assert buffer.full
    assert drain(buffer, 0.0) == ["events@1"]  # back within the limit: the rest wait again
    assert len(buffer) == 2


def test_positions_are_the_item_version_else_the_object_version() -> None:
    assert position_of(watched(EVENTS, 5)) == 5.0
    assert position_of(listed(EVENTS, 6)) == 6.0
    assert position_of(signal("")) is None
    assert (
        position_of(Item(EVENTS, "events", "ADDED", {"metadata": {"resourceVersion": "x1"}}, "", AT)) is None
    )

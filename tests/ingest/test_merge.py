"""The applier's k-way merge: items from several watch streams are applied in resourceVersion order,
whatever order the streams delivered them in, and a ClusterD signal after what the server wrote first.
"""

from __future__ import annotations

import queue
import threading
import time
from datetime import datetime

import pytest
from django.utils import timezone

from apps.ingest import applier as applier_module
from apps.ingest.applier import Applier
from apps.ingest.feed import Feed, SyncGate
from apps.ingest.items import CLUSTERD_SOURCE, Item, sources_of
from apps.jobs.models import Cluster

pytestmark = pytest.mark.django_db(transaction=True)


def watch_item(source: str, rv: int, event_type: str = "MODIFIED") -> Item:
    resource = source.split(":")[0]
    obj = {"metadata": {"resourceVersion": str(rv), "name": f"{resource}-{rv}"}}
    return Item(source, resource, event_type, obj, str(rv), timezone.now())


def signal_item(position: str) -> Item:
    return Item(CLUSTERD_SOURCE, CLUSTERD_SOURCE, "SIGNAL", object(), position, timezone.now())


def label(item: Item) -> str:
    if item.resource == CLUSTERD_SOURCE:
        return f"clusterd@{item.resource_version}"
    return f"{item.resource}@{item.resource_version}"


@pytest.fixture
def applied(monkeypatch: pytest.MonkeyPatch, settings: object) -> list[str]:
    # Long holds: in this test only watermarks may release an item.
    settings.EVENTS_INGEST_REORDER_SECONDS = 30.0
    settings.EVENTS_INGEST_WARMUP_WINDOW_SECONDS = 30.0
    settings.EVENTS_INGEST_WARMUP_SECONDS = 0.0
    order: list[str] = []

    def record(self: Applier, store: object, item: Item) -> bool:
        if item.event_type != "BOOKMARK":
            order.append(label(item))
        return True

    monkeypatch.setattr(Applier, "apply_one", record)
    monkeypatch.setattr(applier_module.broadcast, "flush", lambda timeout=5.0: True)
    return order


def make_applier(cluster: Cluster) -> Applier:
    """An applier with every source synced and no lease to check: only the merge is under test."""
    feed = Feed(queue.Queue(), threading.Event())
    return Applier(cluster, feed, SyncGate(), lease=None, lost=threading.Event(), db_retry_max=1.0)


def run_applier(applier: Applier) -> threading.Thread:
    thread = threading.Thread(target=applier.run, daemon=True)
    thread.start()
    return thread


def wait_len(items: list[str], n: int, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while len(items) < n and time.monotonic() < deadline:
        time.sleep(0.01)


def test_streams_are_merged_by_resource_version(applied: list[str]) -> None:
    cluster = Cluster.objects.create(name="merge", kubeconfig_path="/dev/null", namespaces=["team"])
    applier = make_applier(cluster)
    sources = sorted(sources_of(cluster))
    events, podgroups, configmaps = "events:team", "podgroups:team", "configmaps:team"
    thread = run_applier(applier)
    try:
        # The Events stream is fast, the PodGroup and ConfigMap streams lag behind it.
        applier.feed.put(watch_item(events, 12))
        applier.feed.put(watch_item(events, 15))
        applier.feed.put(signal_item("14"))  # ClusterD signalled when the server was at version 14
        time.sleep(0.3)
        assert applied == [], "nothing may be applied before every stream has caught up"
        applier.feed.put(watch_item(podgroups, 11))
        applier.feed.put(watch_item(configmaps, 13))
        applier.feed.put(watch_item(podgroups, 14))
        for source in sources:  # bookmarks: every stream has delivered everything up to 20
            applier.feed.put(Item(source, source.split(":")[0], "BOOKMARK", {}, "20", timezone.now()))
        wait_len(applied, 6)
        assert applied == [
            "podgroups@11",
            "events@12",
            "configmaps@13",
            "podgroups@14",
            "clusterd@14",
            "events@15",
        ]
    finally:
        applier.halt.set()
        thread.join(5)


def test_a_silent_stream_delays_an_item_at_most_the_hold(applied: list[str], settings: object) -> None:
    settings.EVENTS_INGEST_REORDER_SECONDS = 0.3
    settings.EVENTS_INGEST_WARMUP_WINDOW_SECONDS = 0.3
    cluster = Cluster.objects.create(name="silent", kubeconfig_path="/dev/null", namespaces=["team"])
    applier = make_applier(cluster)
    thread = run_applier(applier)
    try:
        started: datetime = timezone.now()
        applier.feed.put(watch_item("events:team", 7))
        wait_len(applied, 1)
        waited = (timezone.now() - started).total_seconds()
        assert applied == ["events@7"]
        assert 0.25 <= waited < 2.0, waited
    finally:
        applier.halt.set()
        thread.join(5)


def test_a_busy_applier_never_lets_a_signal_pass_older_queued_items(
    monkeypatch: pytest.MonkeyPatch, settings: object
) -> None:
    """The soak's duplicates began here: after a restart the applier is behind, the hold of a live
    ClusterD signal runs out while it stores the backlog, and the watch items older than the signal
    were still in the queue, outside the merge: the signal went first, minutes ahead of them."""
    settings.EVENTS_INGEST_REORDER_SECONDS = 0.3
    settings.EVENTS_INGEST_WARMUP_WINDOW_SECONDS = 0.3
    settings.EVENTS_INGEST_WARMUP_SECONDS = 0.0
    order: list[str] = []

    def slow_store(self: Applier, store: object, item: Item) -> bool:
        order.append(label(item))
        time.sleep(0.5)  # a slow database: longer than the hold
        return True

    monkeypatch.setattr(Applier, "apply_one", slow_store)
    monkeypatch.setattr(applier_module.broadcast, "flush", lambda timeout=5.0: True)
    cluster = Cluster.objects.create(name="busy", kubeconfig_path="/dev/null", namespaces=["team"])
    applier = make_applier(cluster)
    podgroups = "podgroups:team"  # the other streams stay silent: only the hold releases items
    applier.feed.put(signal_item("30"))  # ClusterD signalled at server version 30
    applier.feed.put(watch_item(podgroups, 11))
    thread = run_applier(applier)
    try:
        time.sleep(0.45)  # podgroups@11 is being stored; the signal's hold has run out
        for rv in (12, 13, 14):  # written before version 30, delivered while the applier was busy
            applier.feed.put(watch_item(podgroups, rv))
        wait_len(order, 5, seconds=10)
        assert order == ["podgroups@11", "podgroups@12", "podgroups@13", "podgroups@14", "clusterd@30"]
    finally:
        applier.halt.set()
        thread.join(5)

"""Watch semantics through ``kubernetes.watch.Watch`` (and raw HTTP where the client hides details)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable
from urllib.parse import urlparse

import pytest
from kubernetes import client, watch

from simcluster.kubeapi import KubeApiEmulator
from tests.support.kubeapi import ACJ, ascendjob, pod


class Collector:
    """Runs a Watch in a thread and records (type, name, rv) tuples."""

    def __init__(self, func: Callable, *args: object, **kwargs: object) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.error: Exception | None = None
        self.watch = watch.Watch()
        self.ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(func, args, kwargs), daemon=True)
        self._thread.start()
        time.sleep(0.2)  # let the request reach the server

    def _run(self, func: Callable, args: tuple, kwargs: dict) -> None:
        try:
            for ev in self.watch.stream(func, *args, **kwargs):
                meta = ev["raw_object"].get("metadata", {})
                self.events.append((ev["type"], meta.get("name", ""), meta.get("resourceVersion", "")))
        except Exception as exc:  # surfaced by join()
            self.error = exc

    def join(self, timeout: float = 10) -> list[tuple[str, str, str]]:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "watch did not end"
        if self.error:
            raise self.error
        return self.events


def _types_names(events: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    return [(t, n) for t, n, _ in events if t != "BOOKMARK"]


def test_watch_initial_then_live(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_pod(ns, pod("existing"))
    col = Collector(core.list_namespaced_pod, ns, timeout_seconds=2)
    core.create_namespaced_pod(ns, pod("new"))
    core.patch_namespaced_pod("new", ns, {"metadata": {"labels": {"x": "1"}}})
    core.delete_namespaced_pod("new", ns)
    events = col.join()
    assert _types_names(events) == [
        ("ADDED", "existing"),
        ("ADDED", "new"),
        ("MODIFIED", "new"),
        ("DELETED", "new"),
    ]
    rvs = [int(rv) for _, _, rv in events]
    assert rvs[1:] == sorted(rvs[1:])


def test_watch_resume_from_last_seen(custom: client.CustomObjectsApi, ns: str) -> None:
    start = custom.list_namespaced_custom_object(*ACJ, ns, "ascendjobs")["metadata"]["resourceVersion"]
    for name in ("a", "b"):
        custom.create_namespaced_custom_object(*ACJ, ns, "ascendjobs", ascendjob(name))
    w = watch.Watch()
    seen = []
    for ev in w.stream(
        custom.list_namespaced_custom_object,
        *ACJ,
        ns,
        "ascendjobs",
        resource_version=start,
        timeout_seconds=5,
    ):
        seen.append((ev["type"], ev["object"]["metadata"]["name"]))
        if len(seen) == 2:
            w.stop()
    assert seen == [("ADDED", "a"), ("ADDED", "b")]
    last = w.resource_version
    # Missed while the watcher was down:
    custom.patch_namespaced_custom_object(*ACJ, ns, "ascendjobs", "a", {"spec": {"replicas": 2}})
    custom.create_namespaced_custom_object(*ACJ, ns, "ascendjobs", ascendjob("c"))
    resumed = [
        (ev["type"], ev["object"]["metadata"]["name"])
        for ev in watch.Watch().stream(
            custom.list_namespaced_custom_object,
            *ACJ,
            ns,
            "ascendjobs",
            resource_version=last,
            timeout_seconds=1,
        )
    ]
    assert resumed == [("MODIFIED", "a"), ("ADDED", "c")]


def test_compact_gives_410_then_relist(emulator: KubeApiEmulator, core: client.CoreV1Api, ns: str) -> None:
    old_rv = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map(ns, {"metadata": {"name": "after"}})
    emulator.compact()
    with pytest.raises(client.ApiException) as exc:
        list(
            watch.Watch().stream(
                core.list_namespaced_config_map, ns, resource_version=old_rv, timeout_seconds=2
            )
        )
    assert exc.value.status == 410 and "Expired" in exc.value.reason
    # Relist, then watch from the fresh resourceVersion: works and replays nothing old.
    fresh = core.list_namespaced_config_map(ns)
    assert [c.metadata.name for c in fresh.items] == ["after"]
    col = Collector(
        core.list_namespaced_config_map,
        ns,
        resource_version=fresh.metadata.resource_version,
        timeout_seconds=1,
    )
    core.create_namespaced_config_map(ns, {"metadata": {"name": "live"}})
    assert _types_names(col.join()) == [("ADDED", "live")]


def test_raw_410_error_event(emulator: KubeApiEmulator, core: client.CoreV1Api, ns: str) -> None:
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map(ns, {"metadata": {"name": "x"}})
    emulator.compact()
    url = urlparse(emulator.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
    conn.request("GET", f"/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion={rv}")
    resp = conn.getresponse()
    assert resp.status == 200
    lines = [json.loads(line) for line in resp.read().splitlines() if line]
    assert len(lines) == 1 and lines[0]["type"] == "ERROR"
    assert lines[0]["object"]["code"] == 410 and lines[0]["object"]["reason"] == "Expired"


def test_bookmarks_update_client_resource_version(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}})
    w = watch.Watch()
    types = [
        ev["type"]
        for ev in w.stream(core.list_namespaced_config_map, ns, allow_watch_bookmarks=True, timeout_seconds=3)
    ]
    assert types[0] == "ADDED" and "BOOKMARK" in types
    # Another namespace's write moves the global rv; the bookmark carries it to the client.
    core.create_namespaced_config_map("default", {"metadata": {"generateName": "bm-"}})
    w2 = watch.Watch()
    for ev in w2.stream(core.list_namespaced_config_map, ns, allow_watch_bookmarks=True, timeout_seconds=3):
        if ev["type"] == "BOOKMARK":
            break
    current = core.list_namespaced_config_map(ns).metadata.resource_version
    assert w2.resource_version == current


def test_label_selector_transitions(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_pod(ns, pod("other", {"role": "ps"}))
    col = Collector(core.list_namespaced_pod, ns, label_selector="role in (worker)", timeout_seconds=2)
    core.create_namespaced_pod(ns, pod("w", {"role": "worker"}))
    core.patch_namespaced_pod("other", ns, {"metadata": {"labels": {"x": "y"}}})  # never matches: invisible
    core.patch_namespaced_pod("w", ns, {"metadata": {"labels": {"role": "ps"}}})  # leaves -> DELETED
    core.patch_namespaced_pod("other", ns, {"metadata": {"labels": {"role": "worker"}}})  # enters -> ADDED
    core.patch_namespaced_pod("other", ns, {"metadata": {"labels": {"z": "1"}}})  # stays -> MODIFIED
    core.delete_namespaced_pod("other", ns)
    events = col.join()
    assert _types_names(events) == [
        ("ADDED", "w"),
        ("DELETED", "w"),
        ("ADDED", "other"),
        ("MODIFIED", "other"),
        ("DELETED", "other"),
    ]


def test_cluster_wide_watch_with_field_selector(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespace({"metadata": {"name": f"{ns}-b"}})
    try:
        rv = core.list_pod_for_all_namespaces(limit=1).metadata.resource_version
        col = Collector(
            core.list_pod_for_all_namespaces,
            resource_version=rv,
            timeout_seconds=1,
            field_selector="metadata.name=target",
        )
        core.create_namespaced_pod(ns, pod("target"))
        core.create_namespaced_pod(f"{ns}-b", pod("target"))
        core.create_namespaced_pod(ns, pod("ignored"))
        assert _types_names(col.join()) == [("ADDED", "target"), ("ADDED", "target")]
    finally:
        core.delete_namespace(f"{ns}-b")


def test_timeout_seconds_ends_stream(core: client.CoreV1Api, ns: str) -> None:
    t0 = time.monotonic()
    assert list(watch.Watch().stream(core.list_namespaced_pod, ns, timeout_seconds=1)) == []
    assert 0.9 <= time.monotonic() - t0 < 3


def test_many_concurrent_watchers(emulator: KubeApiEmulator, core: client.CoreV1Api, ns: str) -> None:
    url = urlparse(emulator.url)
    conns = []
    for _ in range(30):
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
        conn.request("GET", f"/api/v1/namespaces/{ns}/configmaps?watch=1&timeoutSeconds=1")
        conns.append(conn.getresponse())
    core.create_namespaced_config_map(ns, {"metadata": {"name": "fanout"}})
    for resp in conns:
        events = [json.loads(line) for line in resp.read().splitlines() if line]
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "fanout")]


def test_slow_consumer_gets_410_instead_of_unbounded_buffer() -> None:
    with KubeApiEmulator(watch_queue_limit=5) as emu:
        url = urlparse(emu.url)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
        conn.request("GET", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=5")
        resp = conn.getresponse()  # headers only; the body is not read while we write
        api = client.ApiClient(client.Configuration(host=emu.url))
        core = client.CoreV1Api(api)
        big = "x" * 200_000
        for i in range(60):
            core.create_namespaced_config_map(
                "default", {"metadata": {"name": f"big-{i}"}, "data": {"d": big}}
            )
        lines = [json.loads(line) for line in resp.read().splitlines() if line]
        assert lines[-1]["type"] == "ERROR" and lines[-1]["object"]["code"] == 410
        assert len(lines) < 61
        api.close()


def test_the_bookmark_cadence_is_kube_apiservers(monkeypatch: pytest.MonkeyPatch) -> None:
    """staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go: ``defaultBookmarkFrequency =
    time.Minute``. Frequent bookmarks would release the ingester's reorder buffer sooner than a
    real cluster does (README, "Storm"); ``SIM_BOOKMARK_SECONDS`` changes it for an experiment."""
    monkeypatch.delenv("SIM_BOOKMARK_SECONDS", raising=False)
    assert KubeApiEmulator().api.bookmark_interval == 60.0
    monkeypatch.setenv("SIM_BOOKMARK_SECONDS", "0.25")
    assert KubeApiEmulator().api.bookmark_interval == 0.25


def _bookmark_times(emu: KubeApiEmulator, timeout_s: int) -> tuple[list[float], float]:
    """Seconds after the request at which bookmarks came, and when the stream ended."""
    url = urlparse(emu.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout_s + 10)
    started = time.monotonic()
    conn.request(
        "GET",
        f"/api/v1/namespaces/default/configmaps?watch=1&allowWatchBookmarks=true&timeoutSeconds={timeout_s}",
    )
    resp = conn.getresponse()
    times = []
    while line := resp.readline():
        if json.loads(line)["type"] == "BOOKMARK":
            times.append(time.monotonic() - started)
    return times, time.monotonic() - started


def test_a_bookmark_comes_two_seconds_before_the_deadline_and_not_for_short_watches() -> None:
    """cacheWatcher.nextBookmarkTime (staging/src/k8s.io/apiserver/pkg/storage/cacher/
    cache_watcher.go): every bookmarkFrequency, or 2 s before the watch's deadline if that is
    sooner; a watch shorter than 2 s gets none."""
    with KubeApiEmulator(bookmark_interval=60.0) as emu:
        times, ended = _bookmark_times(emu, 4)
        assert len(times) == 1 and 1.8 <= times[0] <= 2.8 and 3.9 <= ended <= 5.0
        times, _ = _bookmark_times(emu, 1)
        assert times == []

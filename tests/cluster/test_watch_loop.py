"""The one watch loop (``apps.cluster.watch``) against the simulated Kubernetes API over HTTP.

The emulator is this module's own (``simcluster.kubeapi``): compaction and injected 503/429 are
server-wide, so a shared cluster would pass them to every other watcher of the run. It behaves as
an API server does: bookmarks only on ``allowWatchBookmarks``, a too-old resourceVersion answered
inside the watch stream with an ``ERROR`` event carrying a 410 ``Expired`` Status.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from apps.cluster.backoff import Backoff
from apps.cluster.client import ClusterRef, forget_client
from apps.cluster.errors import ClusterError
from apps.cluster.watch import WatchHandler, WatchLoop, WatchTarget
from simcluster.kubeapi import KubeApiEmulator
from tests.support import wait_for


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KubeApiEmulator, Path]]:
    emu = KubeApiEmulator(host="127.0.0.1", port=0, bookmark_interval=0.2)
    emu.start()
    kubeconfig = emu.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
    try:
        yield emu, kubeconfig
    finally:
        emu.stop()


@pytest.fixture
def core(emulator: tuple[KubeApiEmulator, Path]) -> Iterator[k8s.CoreV1Api]:
    emu, kubeconfig = emulator
    emu.faults.clear()
    api = k8s_config.new_client_from_config(config_file=str(kubeconfig))
    yield k8s.CoreV1Api(api)
    emu.faults.clear()
    api.close()


@pytest.fixture
def ref(emulator: tuple[KubeApiEmulator, Path]) -> Iterator[ClusterRef]:
    cluster = ClusterRef(name=f"watch-{uuid.uuid4().hex[:6]}", kubeconfig_path=str(emulator[1]))
    yield cluster
    forget_client(cluster)


@pytest.fixture
def namespace(core: k8s.CoreV1Api) -> str:
    name = f"wl-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


class Recorder(WatchHandler):
    """Everything the loop handed over, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.lock = threading.Lock()

    def _note(self, what: str, detail: Any) -> None:
        with self.lock:
            self.calls.append((what, detail))

    def of(self, what: str) -> list[Any]:
        with self.lock:
            return [detail for kind, detail in self.calls if kind == what]

    def listed(self, items: list[dict[str, Any]], resource_version: str) -> None:
        self._note("listed", sorted(i["metadata"]["name"] for i in items))

    def changed(self, event_type: str, obj: dict[str, Any], resource_version: str) -> None:
        self._note("changed", (event_type, obj["metadata"]["name"]))

    def bookmark(self, resource_version: str) -> None:
        self._note("bookmark", int(resource_version))

    def expired(self, error: ClusterError) -> None:
        self._note("expired", error.status)

    def failed(self, error: ClusterError, delay: float) -> None:
        self._note("failed", (error.status, delay))


def running(loop: WatchLoop) -> threading.Thread:
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    return thread


def configmap(core: k8s.CoreV1Api, namespace: str, name: str) -> str:
    created = core.create_namespaced_config_map(namespace, {"metadata": {"name": name}})
    return str(created.metadata.resource_version)


def test_lists_then_watches_and_bookmarks_advance_the_version(
    emulator: tuple[KubeApiEmulator, Path], core: k8s.CoreV1Api, ref: ClusterRef, namespace: str
) -> None:
    configmap(core, namespace, "before")
    seen, stop = Recorder(), threading.Event()
    # 4 s: kube-apiserver sends no bookmark in a watch's last 2 s (cacheWatcher.nextBookmarkTime).
    loop = WatchLoop(ref, WatchTarget("configmaps", namespace), seen, stop, watch_timeout=4)
    thread = running(loop)
    try:
        wait_for(lambda: seen.of("listed"), 10, "the first list")
        assert seen.of("listed") == [["before"]]
        configmap(core, namespace, "live")
        wait_for(lambda: ("ADDED", "live") in seen.of("changed"), 10, "the live ADDED event")
        # Nothing changes in this namespace now, but the server keeps writing elsewhere: the
        # bookmarks (which the loop asked for) carry its newest version, so a resume starts there.
        elsewhere = int(configmap(core, "default", f"elsewhere-{uuid.uuid4().hex[:6]}"))
        wait_for(lambda: any(rv >= elsewhere for rv in seen.of("bookmark")), 10, "a bookmark past it")
        assert int(loop.resource_version) >= elsewhere
        assert seen.of("changed") == [("ADDED", "live")], "a bookmark is not a change"
        assert loop.relists == 1
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()


def test_a_too_old_version_is_410_and_the_loop_relists(
    emulator: tuple[KubeApiEmulator, Path], core: k8s.CoreV1Api, ref: ClusterRef, namespace: str
) -> None:
    emu = emulator[0]
    kept = configmap(core, namespace, "kept")  # the version a watcher stored before it went away
    configmap(core, namespace, "while-away")
    emu.compact()  # the server no longer keeps what happened after ``kept``
    seen, stop = Recorder(), threading.Event()
    loop = WatchLoop(
        ref, WatchTarget("configmaps", namespace), seen, stop, resource_version=kept, watch_timeout=2
    )
    thread = running(loop)
    try:
        wait_for(lambda: seen.of("listed"), 10, "a relist after 410")
        assert seen.calls[0] == ("expired", 410), seen.calls
        assert seen.of("listed") == [["kept", "while-away"]]  # the whole set: nothing is missed
        configmap(core, namespace, "after")
        wait_for(lambda: ("ADDED", "after") in seen.of("changed"), 10, "the watch continued")
        assert not seen.of("failed"), "410 is a relist, not an error to back off from"
    finally:
        stop.set()
        thread.join(10)


def test_errors_back_off_with_jitter_and_honour_retry_after(
    emulator: tuple[KubeApiEmulator, Path], core: k8s.CoreV1Api, ref: ClusterRef, namespace: str
) -> None:
    emu = emulator[0]
    emu.faults.unavailable_for(1.5)  # every request is 503 for a while
    seen, stop = Recorder(), threading.Event()
    backoff = Backoff(initial=0.1, maximum=0.4, jitter=0.5, rng=random.Random(7))
    loop = WatchLoop(ref, WatchTarget("configmaps", namespace), seen, stop, watch_timeout=2, backoff=backoff)
    thread = running(loop)
    try:
        wait_for(lambda: seen.of("listed"), 15, "the list once the server is back")
        failures = seen.of("failed")
        assert len(failures) >= 3, failures
        assert {status for status, _ in failures} == {503}
        for (_, delay), base in zip(failures, [0.1, 0.2, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4], strict=False):
            assert base * 0.5 <= delay <= base, (delay, base)  # doubling, capped, spread by jitter
    finally:
        stop.set()
        thread.join(10)


def test_a_throttled_call_waits_what_the_server_asked(
    emulator: tuple[KubeApiEmulator, Path], ref: ClusterRef, namespace: str
) -> None:
    emulator[0].faults.throttle_next(1, retry_after=1)  # 429 with Retry-After: 1
    seen, stop = Recorder(), threading.Event()
    backoff = Backoff(initial=0.1, maximum=5.0)
    loop = WatchLoop(ref, WatchTarget("configmaps", namespace), seen, stop, watch_timeout=2, backoff=backoff)
    thread = running(loop)
    try:
        wait_for(lambda: seen.of("listed"), 10, "the list after the throttled call")
        assert seen.of("failed") == [(429, 1.0)]
    finally:
        stop.set()
        thread.join(10)


def test_backoff_doubles_to_its_cap_resets_and_prefers_retry_after() -> None:
    backoff = Backoff(initial=0.5, maximum=4.0, jitter=0.0)
    assert [backoff.next_delay() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    backoff.reset()
    assert backoff.next_delay() == 0.5
    assert backoff.next_delay(retry_after=3.0) == 3.0
    assert backoff.next_delay(retry_after=60.0) == 4.0  # a server's wish, within our cap
    spread = Backoff(initial=1.0, maximum=1.0, jitter=0.5, rng=random.Random(3))
    delays = [spread.next_delay() for _ in range(50)]
    assert all(0.5 <= d <= 1.0 for d in delays) and len(set(delays)) > 40

"""The decider watches every cluster, also one registered after it started.

In a fresh install the in-cluster row is made by whichever process starts first (the ingester's or the
decider's ``cluster_register_default``); a decider that listed the clusters once, before the row
existed, answered nothing (the deploy rehearsal found it: ClusterD waited for an answer that never came).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from apps.decisions import watcher as watcher_module
from apps.jobs.models import Cluster
from tests.support import wait_for


class Recording:
    """A stand-in PodGroupWatcher: records the cluster it was made for and whether it was stopped."""

    made: list[Recording] = []

    def __init__(self, cluster: Cluster, **_: Any) -> None:
        self.cluster, self.stopped = cluster, threading.Event()
        Recording.made.append(self)

    def run(self) -> None:
        self.stopped.wait()

    def stop(self) -> None:
        self.stopped.set()


@pytest.mark.django_db(transaction=True)
def test_a_cluster_registered_after_the_start_is_watched_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watcher_module, "PodGroupWatcher", Recording)
    Recording.made = []
    first = Cluster.objects.create(name="first", kubeconfig_path="/nonexistent")
    stop = threading.Event()
    thread = threading.Thread(
        target=watcher_module.run_decision_watchers, args=(stop,), kwargs={"rescan_seconds": 0.05}
    )
    thread.start()
    try:
        wait_for(lambda: [w.cluster.pk for w in Recording.made] == [first.pk], 10, "the first cluster")
        later = Cluster.objects.create(name="later", in_cluster=True)
        wait_for(lambda: len(Recording.made) == 2, 10, "the cluster registered later")
        assert [w.cluster.pk for w in Recording.made] == [first.pk, later.pk]  # one watcher each
    finally:
        stop.set()
        thread.join(10)
    assert all(w.stopped.is_set() for w in Recording.made)

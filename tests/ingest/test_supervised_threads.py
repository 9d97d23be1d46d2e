"""Issue #24 item 6 (was item 7 of the review): a crash in an ingester thread is not silent.

The adopter's threads used to die on anything but ``ClusterError`` (an ``IntegrityError`` when two
processes overlap in a rolling update, a database outage) and nothing restarted them: adoption
stopped and the process looked healthy. Now a term thread's crash ends the term, the next term
restarts every thread of it from the stored cursors, and the thread's record shows the restart.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import IntegrityError

from apps.core.supervision import supervised_threads_ready, supervised_threads_status
from apps.ingest import runner
from apps.ingest.runner import ClusterIngester
from apps.jobs.models import Cluster, TrainingJob
from simcluster.kube import Kube
from tests.support import RedisServer, wait_for
from tests.support.sim import create_job, make_job

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def crashing_once(monkeypatch: pytest.MonkeyPatch, settings: Any) -> list[str]:
    """The first stream a term follows raises ``IntegrityError`` (what two overlapping adopters hit)."""
    settings.SUPERVISOR_BACKOFF_INITIAL_SECONDS = 0.05
    settings.SUPERVISOR_BACKOFF_MAX_SECONDS = 0.1
    crashed: list[str] = []
    real = runner.follow_stream

    def follow(*args: Any, **kwargs: Any) -> None:
        if not crashed:
            crashed.append(args[2].resource)
            raise IntegrityError('duplicate key value violates unique constraint "uniq_job"')
        real(*args, **kwargs)

    monkeypatch.setattr(runner, "follow_stream", follow)
    return crashed


@pytest.fixture
def supervised_ingester(
    cluster_row: Cluster, private_broker: RedisServer, crashing_once: list[str]
) -> Iterator[ClusterIngester]:
    ingester = ClusterIngester(cluster_row)
    ingester.watch_timeout = 5
    ingester.start()
    try:
        yield ingester
    finally:
        ingester.stop()


def test_a_crashed_watcher_restarts_with_its_term_and_adoption_goes_on(
    kube: Kube, namespace: str, cluster_row: Cluster, supervised_ingester: ClusterIngester
) -> None:
    ingester = supervised_ingester

    def restarted() -> list[tuple[str, dict[str, Any]]]:
        return [
            (name, status)
            for name, status in supervised_threads_status().items()
            if name.startswith(f"ingest-{cluster_row.name}-") and status["restarts"] >= 1
        ]

    wait_for(lambda: ingester.terms >= 2 and ingester.active.is_set(), 20, "the next term")
    # The next term is active once it holds the lease, before its threads run: a restart is counted
    # by the restarted thread itself, as it starts (apps/core/supervision.py Supervisor.run).
    wait_for(lambda: restarted() and restarted()[0][1]["state"] == "running", 20, "the restarted thread")
    crashed = restarted()
    assert len(crashed) == 1, supervised_threads_status()
    _, status = crashed[0]
    assert status["state"] == "running" and status["alive"]
    assert status["last_error"].startswith("IntegrityError")
    assert supervised_threads_ready()
    create_job(kube, make_job("after-crash", namespace=namespace), running=False)
    wait_for(
        lambda: TrainingJob.objects.filter(cluster=cluster_row, name="after-crash").exists(),
        30,
        "the job adopted after the restart",
    )

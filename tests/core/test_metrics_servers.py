"""Every long-running process serves its metrics (issue #27 item 1): ``manage.py ingest``, ``manage.py
decide`` and a Celery worker (its main process and each pool process) on ``METRICS_PORT``, read with
Prometheus's own parser, each with the histograms and counters the issue names."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from apps.core import metrics
from apps.jobs.models import Cluster
from tests.support import REPO_ROOT, wait_for
from tests.support.metrics import assert_has_the_named_metrics, scrape
from tests.support.processes import connectable, free_port, free_port_block, server_env, stop_process


def test_metrics_port_bad_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METRICS_PORT", "ninety")
    with pytest.raises(ValueError, match="METRICS_PORT"):
        metrics.metrics_port()
    monkeypatch.setenv("METRICS_PORT", "70000")
    with pytest.raises(ValueError, match="METRICS_PORT"):
        metrics.metrics_port()
    monkeypatch.delenv("METRICS_PORT")
    assert metrics.metrics_port() is None
    assert metrics.serve_metrics("unset") is None


def test_decider_kind_is_a_bounded_label() -> None:
    assert [metrics.decider_kind(x) for x in ("rule:3", "user:alice", "default:deadline", "")] == [
        "rule",
        "user",
        "default",
        "none",
    ]


class Command:
    """``manage.py <name>`` on the test database with ``METRICS_PORT`` set; stopped at the end."""

    def __init__(self, *argv: str, port: int) -> None:
        self.log = Path(f"/tmp/metrics-{argv[0]}-{uuid.uuid4().hex[:8]}.log")
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", *argv],
            cwd=REPO_ROOT,
            env=server_env("redis://127.0.0.1:1/0", METRICS_PORT=str(port), METRICS_ADDR="127.0.0.1"),
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def stop(self) -> None:
        stop_process(self.proc)


@pytest.fixture
def commands() -> Iterator[list[Command]]:
    started: list[Command] = []
    yield started
    for command in started:
        command.stop()


@pytest.mark.slow(seconds=15)
def test_ingester_and_decider_serve_their_metrics(cluster_row: Cluster, commands: list[Command]) -> None:
    ingest_port, decide_port = free_port(), free_port()
    commands.append(Command("ingest", "--cluster", cluster_row.name, port=ingest_port))
    commands.append(Command("decide", "--processes", "1", port=decide_port))
    for command, port in zip(commands, (ingest_port, decide_port), strict=True):
        wait_for(
            lambda c=command, p=port: connectable(p) or c.proc.poll() is not None,  # type: ignore[misc]
            60,
            f"metrics of {command.proc.args}",
        )
        assert command.proc.poll() is None, command.log.read_text()
        assert_has_the_named_metrics(scrape(port))


@pytest.mark.slow(seconds=15)
def test_a_celery_worker_and_its_pool_process_serve_their_metrics(worker_factory) -> None:  # type: ignore[no-untyped-def]
    port = free_port_block(2)  # the pool's port is bound after its fork: taken where bind(0) never goes
    worker_factory(private=True, METRICS_PORT=str(port), METRICS_ADDR="127.0.0.1")
    # The main process on METRICS_PORT, the pool's first process (where the tasks run) on + 1. A
    # worker starting on a loaded machine (4 test processes on 2 cores) has taken over 30 s.
    for each in (port, port + 1):
        wait_for(lambda p=each: connectable(p), 60, f"worker metrics on {each}")  # type: ignore[misc]
        assert_has_the_named_metrics(scrape(each))
    # Current state, from the broker, in the main process only (the pool processes would count it twice).
    wait_for(lambda: "controlplane_celery_queue_depth" in scrape(port), 30, "queue depth gauge")
    depth = scrape(port)["controlplane_celery_queue_depth"]
    assert depth.type == "gauge" and {s.labels["queue"] for s in depth.samples} == {"default", "push", "slow"}
    assert "controlplane_celery_queue_depth" not in scrape(port + 1)

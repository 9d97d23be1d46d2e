"""Celery is configured for at-least-once delivery, with separate queues and bounded tasks."""

from __future__ import annotations

import uuid

import pytest

from apps.jobs.clusters import cluster_check_health
from apps.jobs.models import Cluster
from controlplane.celery import app
from simcluster.kubeapi import KubeApiEmulator
from tests.support import free_port


def test_at_least_once_settings() -> None:
    conf = app.conf
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    assert conf.task_time_limit > conf.task_soft_time_limit
    # Redis re-delivers unacked tasks after the visibility timeout: it must outlast any task.
    assert conf.broker_transport_options["visibility_timeout"] > conf.task_time_limit
    assert conf.task_routes["policies.push_policy"]["queue"] == "push"
    assert conf.task_routes["policies.reconcile_drift"]["queue"] == "slow"
    assert {"sweep-stuck-syncs", "reconcile-drift", "check-clusters"} <= set(conf.beat_schedule)


def test_push_task_is_registered_with_late_ack() -> None:
    app.loader.import_default_modules()  # what a worker does at start: autodiscover tasks modules
    task = app.tasks["policies.push_policy"]
    assert task.acks_late is True
    assert task.reject_on_worker_lost is True


@pytest.mark.django_db
def test_cluster_health_check_records_reachability(emulator: KubeApiEmulator, tmp_path) -> None:
    good = Cluster.objects.create(name=f"up-{uuid.uuid4().hex[:6]}", kubeconfig_path=str(emulator.kubeconfig))  # type: ignore[attr-defined]
    offline = KubeApiEmulator(port=free_port())
    dead_config = offline.write_kubeconfig(tmp_path / "dead")  # never started: nothing listens there
    bad = Cluster.objects.create(name=f"down-{uuid.uuid4().hex[:6]}", kubeconfig_path=str(dead_config))
    missing = Cluster.objects.create(
        name=f"nocfg-{uuid.uuid4().hex[:6]}", kubeconfig_path=str(tmp_path / "none")
    )
    assert cluster_check_health(good) is True
    assert cluster_check_health(bad) is False
    assert cluster_check_health(missing) is False
    bad.refresh_from_db()
    missing.refresh_from_db()
    assert "unreachable" in bad.health_message
    assert "kubeconfig" in missing.health_message


def test_every_beat_entry_expires_after_one_interval() -> None:
    """Issue #24 (low): without ``expires`` a beat backlog (workers down for an hour) ran every missed
    sweep in a burst when they came back."""
    for name, entry in app.conf.beat_schedule.items():
        assert entry["options"]["expires"] == entry["schedule"], name


def test_enqueue_push_gives_up_quickly_and_clearly_when_the_broker_does_not_answer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue #24 (low): a broker that accepts connections but never answers (a hung Redis, a
    half-open network path) held the request that queued a push; it gives up within seconds, says
    why, and leaves the row to the sweep. Run in a fresh process so it has its own broker config."""
    import os
    import socket
    import subprocess
    import sys

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # the kernel completes the handshake; nothing ever reads or answers
    port = silent.getsockname()[1]
    script = (
        "import time, django; django.setup()\n"
        "from apps.policies.syncs import enqueue_push\n"
        "start = time.monotonic(); enqueue_push(4242)\n"
        "print(f'took {time.monotonic() - start:.2f}')\n"
    )
    url = f"redis://:secret@127.0.0.1:{port}/0"
    # The test settings take the broker from TEST_REDIS_URL; a 1 s timeout keeps the bound tight.
    env = {**os.environ, "CELERY_BROKER_URL": url, "TEST_REDIS_URL": url, "BROKER_TIMEOUT_SECONDS": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60, check=True
        )
    finally:
        silent.close()
    took = float(done.stdout.split("took ")[1])
    assert took < 3.5, done.stderr[-2000:]  # one attempt: connect, then at most one 1 s read
    assert "could not queue the push of sync 4242" in done.stderr, done.stderr[-2000:]
    assert "sweep" in done.stderr and "secret" not in done.stderr

"""Fixtures for the events tests: the simulated cluster over real HTTP/gRPC, an in-process ingester,
private Redis servers, and a real ASGI server in a subprocess.

Nothing is mocked: the ingester talks to the simulator through the official ``kubernetes`` client and
to its ClusterD over gRPC; websocket clients talk to uvicorn over TCP.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from apps.events.models import Incident, JobEvent
from apps.ingest.runner import ClusterIngester
from apps.jobs.models import Cluster, TrainingJob
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support import RedisServer, connectable, free_port, wait_for

REPO = Path(__file__).resolve().parents[2]
# 200x: a retry takes 40 ms, a Job-level reschedule 0.75 s, the platform-mode wait 1.5 s.
CLOCK_SPEED = 200


@pytest.fixture(scope="module")
def sim() -> Iterator[SimCluster]:
    cluster = SimCluster(clock_speed=CLOCK_SPEED, seed=11)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def kube(sim: SimCluster) -> Iterator[Kube]:
    client = Kube(sim.kubeconfig_path)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def namespace(kube: Kube) -> str:
    name = f"ev-{uuid.uuid4().hex[:8]}"
    kube.ensure_namespace(name)
    return name


@pytest.fixture
def cluster_row(sim: SimCluster, namespace: str, transactional_db: None) -> Cluster:
    return Cluster.objects.create(
        name=f"sim-{uuid.uuid4().hex[:6]}",
        kubeconfig_path=sim.kubeconfig_path,
        clusterd_address=sim.grpc_address,
        namespaces=[namespace],
    )


@pytest.fixture(scope="module")
def private_broker() -> Iterator[RedisServer]:
    """Celery messages of these tests go to a Redis nobody consumes: no stray worker answers for us."""
    from controlplane.celery import app as celery_app

    server = RedisServer()
    server.start()
    old = celery_app.conf.broker_url
    celery_app.conf.broker_url = server.url
    celery_app.pool.force_close_all()
    try:
        yield server
    finally:
        celery_app.conf.broker_url = old
        celery_app.pool.force_close_all()
        server.stop()


@pytest.fixture
def ingester(cluster_row: Cluster, private_broker: RedisServer) -> Iterator[ClusterIngester]:
    running = ClusterIngester(cluster_row)
    running.watch_timeout = 5
    running.start()
    try:
        yield running
    finally:
        running.stop()


def job_row(cluster: Cluster, namespace: str, name: str, timeout: float = 15) -> TrainingJob:
    return wait_for(
        lambda: TrainingJob.objects.filter(cluster=cluster, namespace=namespace, name=name).first(),
        timeout,
        f"job {namespace}/{name} adopted",
    )


def kinds_of(job: TrainingJob) -> list[str]:
    return list(JobEvent.objects.filter(job=job).order_by("seq").values_list("kind", flat=True))


def assert_gap_free(job: TrainingJob) -> None:
    seqs = list(JobEvent.objects.filter(job=job).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)), seqs


def closed_incidents(job: TrainingJob) -> list[Incident]:
    return list(Incident.objects.filter(job=job, closed_at__isnull=False).order_by("number"))


# --- processes --------------------------------------------------------------------------------------
def server_env(redis_url: str, **extra: str) -> dict[str, str]:
    """Environment for a subprocess that must use the test database and the given Redis."""
    db = connection.settings_dict
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "controlplane.settings.test",
            "DATABASE_URL": (
                f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
            ),
            "TEST_REDIS_URL": redis_url,
            "REDIS_URL": redis_url,
            "CHANNEL_LAYER_URL": redis_url,
            "PYTHONUNBUFFERED": "1",
            **extra,
        }
    )
    return env


class AsgiServer:
    """``uvicorn controlplane.asgi:application`` in a subprocess on its own port."""

    def __init__(self, redis_url: str, **env: str) -> None:
        self.port = free_port()
        self.env = server_env(redis_url, **env)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(f"/tmp/events-asgi-{uuid.uuid4().hex[:8]}.log")

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws/events/"

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "controlplane.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
                "--ws",
                "websockets",
            ],
            cwd=REPO,
            env=self.env,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        wait_for(lambda: connectable(self.port) or self.proc.poll() is not None, 30, "uvicorn listening")
        if self.proc.poll() is not None:
            raise AssertionError(f"uvicorn exited: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
            self.proc = None

"""Fixtures shared by more than one test package: the reference material, the API personas, the write
path's broker and Celery workers, and the simulated cluster with an in-process ingester.

A package's own fixtures stay in its conftest (which may override these by name, e.g. ``kube`` in
``tests/push``, ``sim`` in ``tests/simcluster``); helpers are in ``tests/support/``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.ingest.runner import ClusterIngester
from apps.jobs.models import Cluster
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support.cluster import Worker, use_broker
from tests.support.processes import FIXTURES_DIR, RedisServer
from tests.support.world import World, build_world, superuser_api_client

# 200x: a retry takes 40 ms, a Job-level reschedule 0.75 s, the platform-mode wait 1.5 s.
CLOCK_SPEED = 200


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The reference material (``tests/fixtures``), laid out like the team's shared folder."""
    return FIXTURES_DIR


@pytest.fixture(autouse=True, scope="module")
def _fresh_connection_pool_per_module() -> Iterator[None]:
    """Give every test module a fresh pool of database connections.

    Event loops of finished tests (websocket communicators, live servers) take their worker threads
    down while those threads still hold a pooled connection, which the pool then never gets back.
    In a server process the loop and its threads live as long as the process, so nothing strands;
    in a test run the strays add up module after module until DB_POOL_MAX is reached and a later
    test waits 10 s for a connection ("couldn't get a connection"). Closing the pool after each
    module bounds that to one module's worth.
    """
    yield
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        conn.close()
        close_pool = getattr(conn, "close_pool", None)
        if close_pool is not None:
            close_pool()


# --- API personas (tests.support.world) ---------------------------------------------------------------
@pytest.fixture
def world(db: Any, tmp_path: Path) -> World:
    return build_world(tmp_path)


@pytest.fixture
def superuser_client(db: Any) -> APIClient:
    return superuser_api_client()


# --- the write path: a private Redis as Celery broker, real workers (tests.support.cluster) -------------
@pytest.fixture(scope="module")
def broker() -> Iterator[RedisServer]:
    from controlplane.celery import app as celery_app

    server = RedisServer()
    server.start()
    old = celery_app.conf.broker_url
    use_broker(server.url)
    yield server
    use_broker(old)
    server.stop()


@pytest.fixture
def worker_factory(broker: RedisServer) -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def make(start: bool = True, **env: str) -> Worker:
        worker = Worker(broker.url, **env)
        if start:
            worker.start()
        started.append(worker)
        return worker

    yield make
    for worker in started:
        worker.stop()


# --- the simulated cluster over real HTTP/gRPC and an in-process ingester --------------------------------
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

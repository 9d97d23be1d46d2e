"""Fixtures shared by more than one test package: the reference material, the API personas, the write
path's broker and Celery workers, and the simulated cluster with an in-process ingester.

A package's own fixtures stay in its conftest (which may override these by name, e.g. ``kube`` in
``tests/policies/push``, ``sim_clock_speed`` in ``tests/simcluster``); helpers are in ``tests/support/``.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.ingest.runner import ClusterIngester
from apps.jobs.models import Cluster
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support.cluster import Worker, purge_queues, use_broker
from tests.support.processes import FIXTURES_DIR, RedisServer
from tests.support.scheduling import module_of
from tests.support.sim import clock_speed
from tests.support.world import World, build_world, superuser_api_client

# 200x: a retry takes 40 ms, a Job-level reschedule 0.75 s, the platform-mode wait 1.5 s.
CLOCK_SPEED = 200


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slowest modules first, so that under xdist they start at once and the rest of the suite runs
    beside them instead of after them (issue #22). ``slow(seconds=N)``: about how long a test takes
    (default 10); a module weighs as much as its slowest test and stays together in its own order (a
    module split by the sort would build its module-scoped fixtures again in the same process)."""

    def expected(item: pytest.Item) -> float:
        mark = item.get_closest_marker("slow")
        return float(mark.kwargs.get("seconds", 10)) if mark is not None else 0.0

    weight: dict[str, float] = {}
    for item in items:
        module = module_of(item.nodeid)
        weight[module] = max(weight.get(module, 0.0), expected(item))
    items.sort(key=lambda item: -weight[module_of(item.nodeid)])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist load``: one test at a time, the slowest first (tests/support/scheduling.py)."""
    from tests.support.scheduling import SlowestFirstScheduling

    return SlowestFirstScheduling(config, log) if config.getoption("dist") == "load" else None


class _DurationLog:
    """Where each test's time went (setup + call + teardown) and on which xdist worker: written to
    ``var/test-durations/<worker>.json`` at the end of each test process, so a run can be read for its
    critical path (``python -m tests.support.durations``) without re-running it."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.order: list[str] = []

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.nodeid not in self.seconds:
            self.order.append(report.nodeid)
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

    @pytest.hookimpl
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # TEST_PROCESS_NAME: bootstrap.py names the processes it runs beside xdist's (browser, API fuzzing).
        worker = os.environ.get("PYTEST_XDIST_WORKER") or os.environ.get("TEST_PROCESS_NAME", "main")
        out = Path(session.config.rootpath) / "var" / "test-durations"
        out.mkdir(parents=True, exist_ok=True)
        rows = [[nodeid, round(self.seconds[nodeid], 3)] for nodeid in self.order]
        (out / f"{worker}.json").write_text(json.dumps(rows))


def pytest_configure(config: pytest.Config) -> None:
    # In the test processes, or in a run without xdist; not in xdist's controller (it would count twice).
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        config.pluginmanager.register(_DurationLog(), "duration-log")


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


@pytest.fixture(autouse=True)
def _no_in_effect_views_kept_from_earlier_tests() -> None:
    """A web process keeps the in-effect views it served (``in_effect_cache.RECENT``); job ids and
    row versions of a rolled-back test can come back, so each test starts without them."""
    from apps.policies.in_effect_cache import RECENT

    RECENT.clear()


# --- API personas (tests.support.world) ---------------------------------------------------------------
@pytest.fixture
def world(db: Any, tmp_path: Path) -> World:
    return build_world(tmp_path)


@pytest.fixture
def superuser_client(db: Any) -> APIClient:
    return superuser_api_client()


# --- the write path: a private Redis as Celery broker, real workers (tests.support.cluster) -------------
# One broker and one shared worker per test process (under xdist: per worker process). The shared
# worker takes messages only while a test that asked for it runs (``Worker.consume``), so a test that
# did not ask for a worker still has none; a test that needs a worker of its own (other settings, or it
# kills the worker) gets a private one, and the paused shared worker does not compete with it.
@pytest.fixture(scope="session")
def session_broker() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture
def broker(session_broker: RedisServer) -> Iterator[RedisServer]:
    """This test publishes its Celery messages to the test process's broker (for this test only)."""
    from controlplane.celery import app as celery_app

    old = celery_app.conf.broker_url
    use_broker(session_broker.url)
    purge_queues()  # nothing an earlier test left behind reaches this one
    yield session_broker
    use_broker(old)


@pytest.fixture
def own_broker(broker: RedisServer) -> Iterator[RedisServer]:
    """A broker of this test alone, for tests that stop or restart it, or that need nobody consuming.

    List it before ``worker_factory``: its workers (private ones) then stop before it does.
    """
    server = RedisServer()
    server.start()
    use_broker(server.url)
    yield server
    use_broker(broker.url)
    server.stop()


@pytest.fixture(scope="session")
def _shared_worker(session_broker: RedisServer) -> Iterator[list[Worker]]:
    """The test process's one Celery worker, started by the first test that asks for it."""
    holder: list[Worker] = []
    yield holder
    for worker in holder:
        worker.stop()


@pytest.fixture
def worker_factory(broker: RedisServer, _shared_worker: list[Worker]) -> Iterator[Callable[..., Worker]]:
    """``worker_factory()``: the shared worker, consuming until this test ends. ``private=True`` or
    environment overrides: a worker process of this test's own (stopped at its end); so is every
    worker of a test on ``own_broker``."""
    from controlplane.celery import app as celery_app

    started: list[Worker] = []
    consuming: list[Worker] = []

    def make(start: bool = True, private: bool = False, **env: str) -> Worker:
        if start and not private and not env and celery_app.conf.broker_url == broker.url:
            if not _shared_worker or not _shared_worker[0].alive():
                _shared_worker[:] = [Worker(broker.url)]
                _shared_worker[0].start()
            else:
                _shared_worker[0].consume(True)
            consuming.append(_shared_worker[0])
            return _shared_worker[0]
        worker = Worker(celery_app.conf.broker_url, **env)
        if start:
            worker.start()
        started.append(worker)
        return worker

    yield make
    for worker in started:
        worker.stop()
    for worker in consuming:
        if worker.alive():
            worker.consume(False)


# --- the simulated cluster over real HTTP/gRPC and an in-process ingester --------------------------------
# One simulated cluster per test process (under xdist: per worker process), booted by the first module
# that asks for ``sim``; tests stay apart by namespace (``namespace``) or by unique job names. A module
# picks its clock speed by overriding ``sim_clock_speed``; the speed holds for that module only. A module
# that must own a cluster (it stops or restarts it, injects API-server-wide faults, counts cluster-wide
# state, or needs a fresh seed for determinism) builds its own ``SimCluster`` and says why there.
@pytest.fixture(scope="session")
def shared_sim() -> Iterator[SimCluster]:
    with SimCluster(clock_speed=CLOCK_SPEED, seed=11, control_port=0) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def sim_clock_speed() -> float:
    """The shared cluster's clock speed while this module runs (a module or package may override it)."""
    return CLOCK_SPEED


@pytest.fixture(scope="module")
def sim(shared_sim: SimCluster, sim_clock_speed: float) -> Iterator[SimCluster]:
    with clock_speed(shared_sim, sim_clock_speed):
        yield shared_sim
        # Recoveries a module leaves in flight end at its own speed, not in the next module's time.
        shared_sim.wait_idle(30)


@pytest.fixture(scope="module")
def kube(sim: SimCluster) -> Iterator[Kube]:
    with closing(Kube(sim.kubeconfig_path)) as client:
        yield client


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
    # use_broker drops the cached pools; force_close_all() would leave a *closed* pool cached, and the
    # next test of this process that publishes gets "Acquire on closed pool".
    use_broker(server.url)
    try:
        yield server
    finally:
        use_broker(old)
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
        # stop() waits TERM_JOIN_SECONDS for the applier; one still storing after that (retrying on a
        # loaded machine) raced the flush that follows (transactional_db) and deadlocked with its
        # TRUNCATE (a fresh clone at stop 39). The flush waits for it.
        for thread in threading.enumerate():
            if thread.name == f"ingest-apply-{cluster_row.name}":
                thread.join(60)

"""Supervised threads (issue #24 item 6): a crash is restarted with backoff, and shows in the thread's
status, in ``/healthz`` and in ``/metrics``; a crash loop makes the process not ready."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import Client, override_settings

from apps.core.supervision import Supervisor, supervised_threads_ready, supervised_threads_status
from tests.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)  # the supervised thread opens its own connection


@pytest.fixture
def fast_restarts(settings: Any) -> None:
    settings.SUPERVISOR_BACKOFF_INITIAL_SECONDS = 0.01
    settings.SUPERVISOR_BACKOFF_MAX_SECONDS = 0.05
    settings.SUPERVISOR_CRASH_LOOP_FAILURES = 3


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def kill_own_database_session() -> None:
    """A real database error: PostgreSQL ends this thread's session under it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")


def test_a_thread_whose_target_raises_a_database_error_is_restarted_and_shows_it(
    fast_restarts: None, stop: threading.Event
) -> None:
    name = f"test-db-{uuid.uuid4().hex[:6]}"
    runs: list[int] = []
    queried = threading.Event()

    def target() -> None:
        runs.append(1)
        if len(runs) <= 2:
            kill_own_database_session()  # raises OperationalError
        with connection.cursor() as cursor:  # the restart got a fresh connection
            cursor.execute("SELECT 1")
        queried.set()
        stop.wait()

    thread = Supervisor(name, target, stop=stop).start()
    assert queried.wait(10), supervised_threads_status().get(name)
    status = supervised_threads_status()[name]
    assert status["alive"] and status["state"] == "running" and status["restarts"] == 2
    assert status["last_error"].startswith("OperationalError") and status["last_error_at"]
    with override_settings(DEBUG=True, METRICS_TOKEN=""):
        metrics = Client().get("/metrics").content.decode()
    assert f'controlplane_supervised_thread_restarts_total{{thread="{name}"}} 2.0' in metrics
    assert f'controlplane_supervised_thread_up{{thread="{name}"}} 1.0' in metrics
    health = Client().get("/healthz").json()
    assert health["threads"][name]["restarts"] == 2 and health["checks"]["threads"] == "ok"
    stop.set()
    thread.join(5)
    assert supervised_threads_status()[name]["state"] == "stopped"


def test_a_crash_loop_makes_the_process_not_ready_until_the_thread_stops(
    fast_restarts: None, stop: threading.Event
) -> None:
    name = f"test-loop-{uuid.uuid4().hex[:6]}"

    def target() -> None:
        raise RuntimeError("broken for good")

    thread = Supervisor(name, target, stop=stop).start()
    wait_for(lambda: supervised_threads_status()[name]["failures_in_a_row"] >= 3, 10, "three crashes")
    assert supervised_threads_status()[name]["crash_loop"] is True
    assert not supervised_threads_ready()
    health = Client().get("/readyz")  # readiness acts on it; liveness (/livez) does not
    assert health.status_code == 503 and Client().get("/livez").status_code == 200
    assert health.json()["checks"]["threads"].startswith("error")
    assert health.json()["threads"][name]["crash_loop"] is True
    with override_settings(DEBUG=True, METRICS_TOKEN=""):
        metrics = Client().get("/metrics").content.decode()
    assert f'controlplane_supervised_thread_up{{thread="{name}"}} 0.0' in metrics
    stop.set()
    thread.join(5)
    assert supervised_threads_status()[name]["state"] == "stopped" and supervised_threads_ready()


def test_a_thread_handed_to_its_owner_is_not_restarted_in_place(stop: threading.Event) -> None:
    """The ingester's term threads: the owner (the next term) restarts them, all together."""
    name = f"test-owned-{uuid.uuid4().hex[:6]}"
    handed: list[Exception] = []

    def target() -> None:
        raise ValueError("x")

    first = Supervisor(name, target, stop=stop, on_crash=handed.append)
    first.start().join(5)
    assert [type(e) for e in handed] == [ValueError]
    assert supervised_threads_status()[name]["state"] == "crashed"
    second = Supervisor(name, stop.wait, stop=stop)  # the next term, same thread name
    thread = second.start()
    wait_for(lambda: supervised_threads_status()[name]["state"] == "running", 5, "the restarted thread")
    assert supervised_threads_status()[name]["restarts"] == 1
    stop.set()
    thread.join(5)

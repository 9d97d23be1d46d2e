"""A real client (``websockets``) against a real server (uvicorn serving ``controlplane.asgi:application``).

The server runs in a subprocess on the test database with a private Redis as its channel layer, so
the Redis-restart test can kill and restart it. Events are stored by this process through
``event_record`` and broadcast through the same Redis.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client, override_settings
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from apps.accounts.models import NamespaceGrant, Role
from apps.accounts.services import token_issue
from apps.events import broadcast
from apps.events.services import event_record
from apps.jobs.models import Cluster, TrainingJob
from tests.support import RedisServer
from tests.support.processes import AsgiServer

pytestmark = pytest.mark.django_db(transaction=True)
# The "offline for 60 s" case, scaled down: replay comes from the database, so the semantic
# ("comes back and receives exactly what it missed") does not depend on how long the client was away.
OFFLINE_SECONDS = 3.0


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture
def live(redis_server: RedisServer, transactional_db: None) -> Iterator[AsgiServer]:
    server = AsgiServer(redis_server.url, EVENTS_WS_CHECK_SECONDS="0.5")
    server.start()
    layers = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [redis_server.url], "capacity": 1000},
        }
    }
    with override_settings(CHANNEL_LAYERS=layers):  # this process broadcasts into the server's Redis
        yield server
    server.stop()


@pytest.fixture
def world() -> dict[str, Any]:
    cluster = Cluster.objects.create(name=f"c-{uuid.uuid4().hex[:6]}")
    jobs = {
        ns: TrainingJob.objects.create(cluster=cluster, namespace=ns, name="llama")
        for ns in ("team-a", "team-b")
    }
    viewer = get_user_model().objects.create_user(f"viewer-{uuid.uuid4().hex[:6]}", password="x")
    NamespaceGrant.objects.create(user=viewer, role=Role.VIEWER, cluster=cluster, namespace="team-a")
    _, key = token_issue(viewer, "ws")
    return {"jobs": jobs, "key": key, "viewer": viewer}


def store(job: TrainingJob, n: int, pause: float = 0.0) -> None:
    for i in range(n):
        event_record(job=job, kind="fault.detected", message=f"e{i}", source="test")
        if pause:
            time.sleep(pause)
    broadcast.flush()
    if threading.current_thread() is not threading.main_thread():
        connection.close()


def headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Token {key}"}


class ResumingClient:
    """What a well-behaved program does: on any disconnect, reconnect and resume from its last seq."""

    def __init__(self, server: AsgiServer, key: str, job_id: int) -> None:
        self.server, self.key, self.job_id = server, key, job_id
        self.seqs: list[int] = []
        self.connects = 0

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                async with connect(
                    self.server.url,
                    origin=self.server.origin,
                    additional_headers=headers(self.key),
                    open_timeout=3,
                ) as ws:
                    self.connects += 1
                    after = self.seqs[-1] if self.seqs else 0
                    await ws.send(json.dumps({"subscribe": {"job": self.job_id, "after_seq": after}}))
                    while not stop.is_set():
                        try:
                            raw = await asyncio.wait_for(ws.recv(), 0.2)
                        except TimeoutError:
                            continue
                        frame = json.loads(raw)
                        if frame["type"] == "event":
                            self.seqs.append(frame["seq"])
            except (ConnectionClosed, OSError, InvalidStatus, TimeoutError):
                await asyncio.sleep(0.2)


async def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def test_refusals_over_a_real_socket(live: AsgiServer, world: dict[str, Any]) -> None:
    async def scenario() -> None:
        with pytest.raises(InvalidStatus) as anonymous:
            async with connect(live.url, origin=live.origin, open_timeout=3):
                pass
        assert anonymous.value.response.status_code == 403
        with pytest.raises(InvalidStatus) as foreign:
            async with connect(
                live.url, origin="https://evil.example.com", additional_headers=headers(world["key"])
            ):
                pass
        assert foreign.value.response.status_code == 403
        async with connect(live.url, origin=live.origin, additional_headers=headers(world["key"])) as ws:
            other = world["jobs"]["team-b"].pk
            await ws.send(json.dumps({"subscribe": {"job": other, "after_seq": 0}}))
            assert json.loads(await ws.recv()) == {
                "type": "error",
                "error": "job not found",
                "code": "not_found",
                "job": other,
            }

    run_async(scenario)


def test_browser_session_is_accepted(live: AsgiServer, world: dict[str, Any]) -> None:
    browser = Client()
    browser.force_login(world["viewer"])
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    job = world["jobs"]["team-a"]
    store(job, 2)

    async def scenario() -> None:
        async with connect(live.url, origin=live.origin, additional_headers={"Cookie": cookie}) as ws:
            await ws.send(json.dumps({"subscribe": {"job": job.pk, "after_seq": 0}}))
            frames = [json.loads(await asyncio.wait_for(ws.recv(), 5)) for _ in range(2)]
            assert [f["seq"] for f in frames] == [1, 2]

    run_async(scenario)


def test_redis_restart_clients_resume_with_nothing_missing(
    live: AsgiServer, redis_server: RedisServer, world: dict[str, Any]
) -> None:
    job = world["jobs"]["team-a"]
    clients = [ResumingClient(live, world["key"], job.pk) for _ in range(3)]

    async def scenario() -> None:
        stop = asyncio.Event()
        tasks = [asyncio.ensure_future(c.run(stop)) for c in clients]
        await asyncio.to_thread(store, job, 5)
        await wait_until(lambda: all(len(c.seqs) >= 5 for c in clients), 10, "clients live")
        producer = asyncio.ensure_future(asyncio.to_thread(store, job, 40, 0.05))
        await asyncio.sleep(0.6)
        redis_server.stop()  # every group membership and queued frame is gone
        await asyncio.sleep(0.8)
        redis_server.start()
        await producer
        await wait_until(lambda: all(c.seqs[-1:] == [45] for c in clients), 20, "clients caught up")
        stop.set()
        await asyncio.gather(*tasks)

    run_async(scenario)
    for client in clients:
        assert client.seqs == list(range(1, 46)), client.seqs  # nothing missing, nothing twice
        assert client.connects >= 1


def test_client_offline_receives_exactly_what_it_missed(live: AsgiServer, world: dict[str, Any]) -> None:
    job = world["jobs"]["team-a"]

    async def scenario() -> None:
        async with connect(live.url, origin=live.origin, additional_headers=headers(world["key"])) as ws:
            await ws.send(json.dumps({"subscribe": {"job": job.pk, "after_seq": 0}}))
            await asyncio.to_thread(store, job, 5)
            first = [json.loads(await asyncio.wait_for(ws.recv(), 5))["seq"] for _ in range(5)]
        assert first == [1, 2, 3, 4, 5]
        # Offline: 20 events happen, and time passes.
        await asyncio.to_thread(store, job, 20)
        await asyncio.sleep(OFFLINE_SECONDS)
        async with connect(live.url, origin=live.origin, additional_headers=headers(world["key"])) as ws:
            await ws.send(json.dumps({"subscribe": {"job": job.pk, "after_seq": first[-1]}}))
            missed = [json.loads(await asyncio.wait_for(ws.recv(), 5))["seq"] for _ in range(20)]
            await asyncio.to_thread(store, job, 3)
            live_after = [json.loads(await asyncio.wait_for(ws.recv(), 5))["seq"] for _ in range(3)]
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(ws.recv(), 0.7)  # and nothing more
        assert missed == list(range(6, 26))
        assert live_after == [26, 27, 28]

    run_async(scenario)


def run_async(scenario: Any) -> None:
    async_to_sync(scenario)()

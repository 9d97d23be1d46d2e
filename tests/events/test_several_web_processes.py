"""Two web processes over one Redis channel layer (issue #27): each serves its own sockets, all live.

Two uvicorn processes serve ``controlplane.asgi:application`` on their own ports (as two web pods
would), with websocket clients on each following the same job. This process stores the events
(store first, broadcast after commit) into the same Redis. Each process's ``FanoutHub`` joins the
job's group for its own socket, so both clients must get every seq once, in order, live: the servers'
safety net (the stored-head check that repairs a lost frame from the database) is set to run only
every 10 minutes, and each server's ``/metrics`` must show no gap filled.

``/metrics`` is per process (the web tier is scraped per process, one uvicorn process per pod):
each server's scrape parses with prometheus_client's parser and counts what that process sent.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import override_settings
from prometheus_client.parser import text_string_to_metric_families
from websockets.asyncio.client import ClientConnection, connect

from apps.accounts.services import token_issue
from apps.events import broadcast
from apps.events.services import event_record
from apps.jobs.models import Cluster, TrainingJob
from tests.support import RedisServer
from tests.support.processes import AsgiServer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow(seconds=20)]

METRICS_TOKEN = "metrics-token-for-this-test"
EVENTS = 60
SOCKETS_PER_SERVER = 3


@pytest.fixture
def servers(transactional_db: None) -> Iterator[list[AsgiServer]]:
    with RedisServer() as redis_server:
        started = [
            # The websocket implementation production runs (uvicorn's default, ``--ws auto``).
            AsgiServer(
                redis_server.url,
                ws="websockets-sansio",
                EVENTS_WS_CHECK_SECONDS="600",
                # Every frame as its own event frame, however far a socket falls behind on a busy
                # machine (60 stored at once): what is checked here is that each process delivers
                # every seq once, in order; coalescing a backlog has tests of its own.
                EVENTS_WS_COALESCE_AFTER=str(10 * EVENTS),
                METRICS_TOKEN=METRICS_TOKEN,
            )
            for _ in range(2)
        ]
        try:
            for server in started:
                server.start()
            # This process broadcasts through the servers' Redis, on the same layer (pub/sub).
            layers = copy.deepcopy(settings.CHANNEL_LAYERS)
            layers["default"]["CONFIG"]["hosts"] = [redis_server.url]
            with override_settings(CHANNEL_LAYERS=layers):
                yield started
        finally:
            for server in started:
                server.stop()


def scrape(server: AsgiServer) -> dict[str, float]:
    """The server's ``/metrics``, parsed by prometheus_client: ``name{labels}`` → value."""
    request = urllib.request.Request(
        f"{server.origin}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}"] = sample.value
    return samples


def scrape_until(
    server: AsgiServer, done: Callable[[dict[str, float]], bool], seconds: float = 5.0
) -> dict[str, float]:
    """``scrape`` again until ``done`` says the samples are what is expected, or ``seconds`` passed."""
    deadline = time.monotonic() + seconds
    samples = scrape(server)
    while not done(samples) and time.monotonic() < deadline:
        time.sleep(0.05)
        samples = scrape(server)
    return samples


async def seqs_until(ws: ClientConnection, last: int) -> list[int]:
    seqs: list[int] = []
    while not seqs or seqs[-1] < last:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 15))
        assert frame["type"] == "event", frame  # no coalesced, resync or error frame
        seqs.append(frame["seq"])
    return seqs


def test_two_web_processes_each_deliver_every_frame_live(servers: list[AsgiServer]) -> None:
    cluster = Cluster.objects.create(name=f"c-{uuid.uuid4().hex[:6]}")
    job = TrainingJob.objects.create(cluster=cluster, namespace="team-a", name="llama")
    admin = get_user_model().objects.create_superuser(f"admin-{uuid.uuid4().hex[:6]}", password="x")
    _, key = token_issue(admin, "ws")

    def store(n: int) -> None:  # in a worker thread: its own database connection, closed after
        try:
            for i in range(n):
                event_record(job=job, kind="fault.detected", message=f"e{i}", source="test")
            assert broadcast.flush(10)
        finally:
            connection.close()

    async def scenario() -> tuple[list[int], ...]:
        sockets = [
            await connect(
                server.url, origin=server.origin, additional_headers={"Authorization": f"Token {key}"}
            )
            for server in servers
            for _ in range(SOCKETS_PER_SERVER)
        ]
        try:
            for ws in sockets:
                await ws.send(json.dumps({"subscribe": {"job": job.pk, "after_seq": 0}}))
            # The first event tells that both hubs joined the group (it may come as a replay).
            await asyncio.to_thread(store, 1)
            firsts = [await seqs_until(ws, 1) for ws in sockets]
            assert firsts == [[1]] * len(sockets)
            await asyncio.to_thread(store, EVENTS)
            return tuple(await asyncio.gather(*(seqs_until(ws, EVENTS + 1) for ws in sockets)))
        finally:
            for ws in sockets:
                await ws.close()

    received = async_to_sync(scenario)()
    for seqs in received:
        assert seqs == list(range(2, EVENTS + 2))  # every seq once, in order: no gap, no duplicate

    sent_name = "controlplane_websocket_frames_sent_total{type=event}"
    for server in servers:
        # Each process counts only what it sent to its own socket; nothing was repaired from the log.
        # A socket adds its sent frames to the counter on its next tick (or as it closes).
        samples = scrape_until(server, lambda s: s.get(sent_name) == SOCKETS_PER_SERVER * (EVENTS + 1))
        assert samples[sent_name] == SOCKETS_PER_SERVER * (EVENTS + 1)
        assert samples.get("controlplane_websocket_gap_fills_total{}", 0.0) == 0.0

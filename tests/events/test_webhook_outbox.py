"""Issue #16 item 12: webhook deliveries are an outbox.

Real parts: PostgreSQL, a private redis-server as the broker (stopped with SIGKILL during the
burst, restarted empty), a real ``celery worker`` process, and a real HTTP receiver.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from apps.events import kinds
from apps.events.models import Incident, Webhook, WebhookDelivery
from apps.events.webhooks import deliveries_sweep
from apps.ingest.observation import JobRef, Observation
from apps.ingest.store import IngestStore
from apps.jobs.models import Cluster, TrainingJob
from controlplane.celery import app as celery_app
from tests.support import RedisServer, wait_for
from tests.support.cluster import Worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
INCIDENTS = 10


class Receiver(BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).seen.append(self.headers["X-Delivery-Id"])
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    Receiver.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()


@pytest.fixture
def broker() -> Iterator[RedisServer]:
    """A broker of this test's own (the shared fixture closes its pools on teardown for good)."""
    server = RedisServer()
    server.start()
    old = celery_app.conf.broker_url
    celery_app.conf.broker_url = server.url
    celery_app._after_fork()  # drop cached pools, like a forked process
    yield server
    celery_app.conf.broker_url = old
    celery_app._after_fork()
    server.stop()


@pytest.fixture
def job(receiver: str) -> TrainingJob:
    cluster = Cluster.objects.create(name=f"c-{uuid.uuid4().hex[:6]}")
    Webhook.objects.create(
        name="ops", url=receiver, secret="s", events=["incident.opened", "incident.closed"]
    )
    return TrainingJob.objects.create(
        cluster=cluster, namespace="team", name="llama", uid=str(uuid.uuid4()), replicas={"Worker": 1}
    )


def observe(store: IngestStore, job: TrainingJob, kind: str, **data: Any) -> None:
    store.record(
        Observation(
            job=JobRef(job.namespace, job.name, job.uid),
            kind=kind,
            message=kind,
            source="test",
            data=data,
            dedupe_key=f"test:{uuid.uuid4()}",
            occurred_at=timezone.now(),
        )
    )


def one_incident(store: IngestStore, job: TrainingJob, n: int) -> None:
    observe(store, job, kinds.FAULT_DETECTED, code=f"80E0{n:04d}", ranks=[n], node="node-1")
    observe(store, job, kinds.STRATEGY_CHOSEN, strategy="retry")
    observe(store, job, kinds.RECOVERY_SUCCEEDED, strategy="retry")


def test_deliveries_are_written_in_the_events_transaction(job: TrainingJob, broker: RedisServer) -> None:
    store = IngestStore(job.cluster)
    with pytest.raises(RuntimeError), transaction.atomic():
        one_incident(store, job, 1)
        # Visible inside the transaction that stored the events: written with them, not after commit.
        assert set(WebhookDelivery.objects.values_list("kind", flat=True)) == {
            "incident.opened",
            "incident.closed",
        }
        raise RuntimeError("roll the events back")
    assert not WebhookDelivery.objects.exists()  # and gone with them
    assert not Incident.objects.exists()


def test_broker_down_during_a_burst_then_every_delivery_arrives(
    job: TrainingJob, broker: RedisServer
) -> None:
    worker = Worker(broker.url, WEBHOOK_BACKOFF_BASE_SECONDS="0.1")
    worker.start()
    store = IngestStore(job.cluster)
    try:
        broker.stop()  # SIGKILL, no persistence: anything queued is gone too
        started = time.monotonic()
        with override_settings(WEBHOOK_REQUEUE_SECONDS=1.0):
            for n in range(INCIDENTS):
                one_incident(store, job, n)
        burst_seconds = time.monotonic() - started
        pending = WebhookDelivery.objects.filter(state=WebhookDelivery.State.PENDING)
        assert pending.count() == 2 * INCIDENTS  # every delivery was written although none was queued
        assert burst_seconds < 20, burst_seconds  # a dead broker does not stall the event writer
        broker.start()
        time.sleep(1.1)  # the rows' lease (WEBHOOK_REQUEUE_SECONDS) runs out
        with override_settings(WEBHOOK_REQUEUE_SECONDS=30.0):
            assert len(deliveries_sweep()) == 2 * INCIDENTS
            assert deliveries_sweep() == []  # leased: the next sweep does not queue them again
        wait_for(
            lambda: not WebhookDelivery.objects.exclude(state=WebhookDelivery.State.DELIVERED).exists(),
            60,
            "every delivery delivered",
        )
    finally:
        worker.stop()
    ids = {str(d) for d in WebhookDelivery.objects.values_list("delivery_id", flat=True)}
    assert len(ids) == 2 * INCIDENTS
    assert ids <= set(Receiver.seen)  # each at least once (the receiver de-duplicates on the id)

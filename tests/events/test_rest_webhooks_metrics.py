"""The incidents endpoint, outbound webhooks (signed, retried, per namespace), ``/metrics``, and the
ClusterD full-state de-duplication at the store level."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.urls import include, path
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.models import NamespaceGrant, Role
from apps.api.events.incidents import incidents_urlpatterns
from apps.api.metrics import metrics_view
from apps.clusterd.client import DeviceFault, FaultSignal, NodeFault
from apps.events import kinds
from apps.events.models import Incident, JobEvent, RestartBudget, Webhook, WebhookDelivery
from apps.events.webhooks import verify, webhooks_dispatch
from apps.ingest.store import IngestStore
from apps.jobs.models import Cluster, TrainingJob
from controlplane.celery import app as celery_app
from tests.support.events import observe

pytestmark = pytest.mark.django_db(transaction=True)

# This module doubles as the URLconf of the API tests: the lead wires the same patterns into /api/v1/.
urlpatterns = [path("api/v1/", include(incidents_urlpatterns)), path("metrics", metrics_view, name="metrics")]


@pytest.fixture
def world() -> dict[str, Any]:
    cluster = Cluster.objects.create(name=f"c-{uuid.uuid4().hex[:6]}")
    jobs = {
        ns: TrainingJob.objects.create(
            cluster=cluster,
            namespace=ns,
            name="llama",
            uid=str(uuid.uuid4()),
            replicas={"Master": 1, "Worker": 1},
        )
        for ns in ("team-a", "team-b")
    }
    viewer = get_user_model().objects.create_user(f"viewer-{uuid.uuid4().hex[:6]}", password="x")
    NamespaceGrant.objects.create(user=viewer, role=Role.VIEWER, cluster=cluster, namespace="team-a")
    return {"cluster": cluster, "jobs": jobs, "viewer": viewer}


def run_incident(store: IngestStore, job: TrainingJob) -> None:
    observe(store, job, kinds.FAULT_DETECTED, code="80E01801", ranks=[8], node="node-2")
    observe(store, job, kinds.TRAINING_STOPPED, ranks=[8])
    observe(store, job, kinds.STRATEGY_CHOSEN, strategy="retry")
    observe(store, job, kinds.RECOVERY_FAILED, strategy="retry")
    observe(store, job, kinds.STRATEGY_CHOSEN, strategy="recover")
    observe(store, job, kinds.RECOVERY_SUCCEEDED, strategy="recover")


@override_settings(ROOT_URLCONF=__name__)
def test_incidents_endpoint_groups_faults_and_checks_permissions(world: dict[str, Any]) -> None:
    store = IngestStore(world["cluster"])
    mine, other = world["jobs"]["team-a"], world["jobs"]["team-b"]
    run_incident(store, mine)
    run_incident(store, other)
    api = APIClient()
    api.force_authenticate(world["viewer"])
    body = api.get(f"/api/v1/jobs/{mine.pk}/incidents/").json()
    assert body["count"] == 1
    (incident,) = body["results"]
    assert incident["outcome"] == "recovered" and incident["strategies"] == ["retry", "recover"]
    assert [a["outcome"] for a in incident["attempts"]] == ["failed", "succeeded"]
    assert set(incident["durations_ms"]) == {"detect", "decide", "recover"}
    assert incident["ranks"] == [8] and incident["nodes"] == ["node-2"]
    # The second strategy is stored as a change, not a second first choice.
    stored = list(JobEvent.objects.filter(job=mine).order_by("seq").values_list("kind", flat=True))
    assert stored.count(kinds.STRATEGY_CHANGED) == 1 and stored.count(kinds.STRATEGY_CHOSEN) == 1
    assert api.get(f"/api/v1/jobs/{mine.pk}/incidents/1/").json()["number"] == 1
    assert api.get(f"/api/v1/jobs/{mine.pk}/incidents/?outcome=open").json()["count"] == 0
    assert api.get(f"/api/v1/jobs/{other.pk}/incidents/").status_code == 404  # another namespace
    assert api.get(f"/api/v1/jobs/{mine.pk}/incidents/7/").status_code == 404
    assert APIClient().get(f"/api/v1/jobs/{mine.pk}/incidents/").status_code in (401, 403)


@override_settings(ROOT_URLCONF=__name__)
def test_budget_endpoint_counts_reschedules(world: dict[str, Any]) -> None:
    store = IngestStore(world["cluster"])
    job = world["jobs"]["team-a"]
    from apps.events.incident_services import budget_set_limits

    budget_set_limits(job=job, backoff_limit=2, fault_retry_times=0)
    for number in (1, 2):
        # Distinct fault ids: a same-code report within 2 s of a closure would otherwise be taken
        # for a late copy of the fault that just closed.
        observe(store, job, kinds.FAULT_DETECTED, code="", fault_id=f"f{number}")
        observe(
            store,
            job,
            kinds.POD_RESCHEDULED,
            source="reschedule-reason",
            pods=["a", "b"],
            reasons=["pod-failed"],
            total=number,
        )
    api = APIClient()
    api.force_authenticate(world["viewer"])
    body = api.get(f"/api/v1/jobs/{job.pk}/budget/").json()
    assert body["backoff_limit"] == {"limit": 2, "used": 2, "left": 0} and body["exhausted"]
    assert [r["total"] for r in body["restarts"]] == [1, 2]
    assert [r["kind"] for r in body["restarts"]] == [kinds.JOB_RESCHEDULED] * 2  # covers every pod
    assert Incident.objects.filter(job=job, outcome="rescheduled").count() == 2


class Receiver(BaseHTTPRequestHandler):
    """Records POSTs; answers with the next status in ``statuses`` (then 200)."""

    statuses: list[int] = []
    seen: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).seen.append((dict(self.headers), body))
        status = type(self).statuses.pop(0) if type(self).statuses else 200
        self.send_response(status)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    Receiver.statuses, Receiver.seen = [500], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()


@pytest.fixture
def eager_celery() -> Iterator[None]:
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


@override_settings(WEBHOOK_BACKOFF_BASE_SECONDS=0.0)
def test_webhooks_are_signed_retried_and_per_namespace(
    world: dict[str, Any], receiver: str, eager_celery: None
) -> None:
    hook = Webhook.objects.create(name="ops-a", namespace="team-a", url=receiver, secret="s3cret")
    Webhook.objects.create(name="ops-b", namespace="team-b", url=receiver + "/b", secret="other")
    store = IngestStore(world["cluster"])
    run_incident(store, world["jobs"]["team-a"])
    deliveries = {d.kind: d for d in WebhookDelivery.objects.filter(webhook=hook)}
    assert set(deliveries) == {"incident.opened", "incident.closed"}
    assert all(d.state == WebhookDelivery.State.DELIVERED for d in deliveries.values())
    assert deliveries["incident.opened"].attempts == 2  # the receiver failed once with 500: retried
    assert not WebhookDelivery.objects.exclude(webhook=hook).exists()  # team-b's hook heard nothing
    for headers, body in Receiver.seen:
        assert verify("s3cret", headers["X-Timestamp"], body, headers["X-Signature"])
        assert not verify("wrong", headers["X-Timestamp"], body, headers["X-Signature"])
    closed = json.loads(Receiver.seen[-1][1])
    assert closed["kind"] == "incident.closed" and closed["incident"]["outcome"] == "recovered"
    assert closed["job"]["namespace"] == "team-a"
    # decision.pending is dispatched by apps.decisions through the same function.
    (pending,) = webhooks_dispatch(
        job=world["jobs"]["team-a"], kind="decision.pending", payload={"decision": 1}
    )
    pending.refresh_from_db()
    assert pending.state == WebhookDelivery.State.DELIVERED


@override_settings(WEBHOOK_BACKOFF_BASE_SECONDS=0.0, WEBHOOK_MAX_ATTEMPTS=3)
def test_webhook_gives_up_and_4xx_is_permanent(
    world: dict[str, Any], receiver: str, eager_celery: None
) -> None:
    Receiver.statuses = [503, 503, 503, 503]
    hook = Webhook.objects.create(name="flaky", url=receiver, secret="k", events=["budget.exhausted"])
    job = world["jobs"]["team-a"]
    (delivery,) = webhooks_dispatch(job=job, kind="budget.exhausted", payload={})
    delivery.refresh_from_db()
    assert delivery.state == WebhookDelivery.State.FAILED and delivery.attempts == 3
    Receiver.statuses = [410]
    (delivery,) = webhooks_dispatch(job=job, kind="budget.exhausted", payload={})
    delivery.refresh_from_db()
    assert delivery.state == WebhookDelivery.State.FAILED and delivery.attempts == 1
    assert webhooks_dispatch(job=job, kind="incident.opened", payload={}) == []  # not subscribed
    assert hook.wants("budget.exhausted")


@override_settings(ROOT_URLCONF=__name__)
def test_metrics_endpoint(world: dict[str, Any]) -> None:
    store = IngestStore(world["cluster"])
    run_incident(store, world["jobs"]["team-a"])
    with override_settings(DEBUG=True):  # without DEBUG, /metrics needs METRICS_TOKEN (issue #16)
        response = Client().get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    # Issue #27: latencies are histograms and totals counters of the process (no database gauges).
    for name in (
        "controlplane_ingest_lag_seconds_bucket",
        "controlplane_policy_push_seconds_bucket",
        "# TYPE controlplane_incidents_total counter",
        "controlplane_websocket_open",
        "controlplane_broadcast_failures_total",
    ):
        assert name in text, name
    with override_settings(METRICS_TOKEN="t0ken"):
        assert Client().get("/metrics").status_code == 401
        assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer t0ken").status_code == 200


def signal(uuid_: str, *devices: str) -> FaultSignal:
    nodes = (
        NodeFault(
            "node-1",
            "10.0.0.1",
            "SN",
            "UnHealthy",
            tuple(DeviceFault(d, "NPU", ("80E01801",), "RestartBusiness", ("uce",), ()) for d in devices),
        ),
    )
    return FaultSignal(uuid_, "", "fault" if devices else "normal", nodes if devices else ())


def test_clusterd_resubscribe_full_state_is_not_a_new_fault(world: dict[str, Any]) -> None:
    job = world["jobs"]["team-a"]
    store = IngestStore(world["cluster"])
    now = timezone.now()
    for n, devices in enumerate([("0",), ("0",), ("0",), ("0", "1")]):  # three resubscribes, then a change
        sig = signal(f"u{n}", *devices)
        store.apply_fault_signal(
            FaultSignal(sig.uuid, job.uid, sig.signal_type, sig.nodes), now + timedelta(seconds=n)
        )
    faults = JobEvent.objects.filter(job=job, kind=kinds.FAULT_DETECTED)
    assert faults.count() == 1  # device 1 has the same code: the same incident's fault, merged
    (incident,) = Incident.objects.filter(job=job)
    assert incident.fault["sources"] == ["clusterd"] and incident.nodes == ["node-1"]


def test_budget_model_left_and_exhausted() -> None:
    budget = RestartBudget(backoff_limit=None, fault_retry_times=0, max_restarts=None)
    assert budget.as_dict()["backoff_limit"]["left"] is None and not budget.exhausted
    budget.max_restarts, budget.process_restarts_used = 2, 2
    assert budget.exhausted and budget.as_dict()["max_restarts"]["left"] == 0

"""``/api/v1/webhooks/``: CRUD for administrators, the write-only secret, the URL rule, audit rows,
deliveries (newest first) and the test message through the real delivery path.

Personas (tests/support/world.py): ``admin`` administers team-a of cluster ``sim``; ``owner`` is an
editor there, ``teammate`` a viewer, ``outsider`` has no grant. Tokens act with their user's roles.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from apps.audit.models import AuditEntry
from apps.events.models import Webhook, WebhookDelivery
from apps.events.webhooks import verify
from controlplane.celery import app as celery_app
from tests.support.world import NAMESPACE, World

pytestmark = pytest.mark.django_db

SECRET = "s3cret-value-never-shown-0123456789"
KINDS = ["incident.opened", "incident.closed", "budget.exhausted", "decision.pending"]
BODY = {
    "name": "pager",
    "cluster": "sim",
    "namespace": NAMESPACE,
    "url": "https://hooks.example.com/mindcluster",
    "secret": SECRET,
    "events": ["incident.closed", "incident.opened", "incident.opened"],
}


def _hook(world: World, **fields: Any) -> Webhook:
    row = {
        "name": "existing",
        "cluster": world.cluster,
        "namespace": NAMESPACE,
        "url": "https://hooks.example.com/x",
        "secret": SECRET,
    }
    return Webhook.objects.create(**{**row, **fields})


def _only_error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.content[:500]
    errors = response.json()["errors"]
    assert len(errors) == 1, errors
    return dict(errors[0])


def test_admin_creates_reads_changes_and_deletes_a_webhook_and_each_write_is_audited(world: World) -> None:
    client = world.client("admin")
    created = client.post("/api/v1/webhooks/", BODY, format="json")
    assert created.status_code == 201, created.content
    hook = created.json()
    assert hook["cluster"] == "sim" and hook["namespace"] == NAMESPACE and hook["active"] is True
    assert hook["events"] == ["incident.opened", "incident.closed"]  # once each, in Kind order
    assert hook["secret_set"] is True and "secret" not in hook
    path = f"/api/v1/webhooks/{hook['id']}/"

    assert client.get("/api/v1/webhooks/").json()["results"] == [hook]
    assert client.get(path).json() == hook
    changed = client.patch(path, {"active": False, "secret": "another-secret-0123456789"}, format="json")
    assert changed.status_code == 200 and changed.json()["active"] is False
    assert Webhook.objects.get(pk=hook["id"]).secret == "another-secret-0123456789"
    assert client.delete(path).status_code == 204
    assert client.get(path).status_code == 404
    assert not Webhook.objects.filter(pk=hook["id"]).exists()

    entries = list(AuditEntry.objects.filter(object_type="events.webhook").order_by("id"))
    assert [e.action for e in entries] == ["webhook.create", "webhook.update", "webhook.delete"]
    for entry in entries:
        assert entry.actor_name == "admin" and entry.token_name == "admin-ci" and entry.request_id
        assert entry.object_id == str(hook["id"])
        assert SECRET not in json.dumps([entry.before, entry.after])
    create, update, delete = entries
    assert create.before is None and create.after["secret"] == "(set)"
    assert update.before["active"] is True and update.after["active"] is False
    assert update.after["secret"] == "(changed)"
    assert delete.before["url"] == BODY["url"] and delete.after is None


def test_a_patch_changes_only_the_fields_given_and_an_empty_one_writes_nothing(world: World) -> None:
    hook = _hook(world, events=["incident.opened"])
    client = world.client("admin")
    assert client.patch(f"/api/v1/webhooks/{hook.pk}/", {}, format="json").json()["name"] == "existing"
    assert not AuditEntry.objects.filter(object_type="events.webhook").exists()
    changed = client.patch(f"/api/v1/webhooks/{hook.pk}/", {"events": []}, format="json").json()
    assert (changed["events"], changed["name"], changed["active"]) == ([], "existing", True)
    stored = Webhook.objects.get(pk=hook.pk)
    assert (stored.events, stored.url, stored.secret) == ([], "https://hooks.example.com/x", SECRET)
    entry = AuditEntry.objects.get(action="webhook.update")
    assert (entry.before["events"], entry.after["events"]) == (["incident.opened"], [])
    assert entry.after["secret"] == "(set)"  # unchanged: not "(changed)"


def test_the_secret_is_never_in_a_response(world: World, superuser_client: APIClient) -> None:
    client = world.client("admin")
    hook = client.post("/api/v1/webhooks/", BODY, format="json").json()
    path = f"/api/v1/webhooks/{hook['id']}/"
    responses = [
        client.get("/api/v1/webhooks/"),
        client.get(path),
        client.patch(path, {"name": "renamed"}, format="json"),
        client.post(f"{path}test/"),
        client.get(f"{path}deliveries/"),
        superuser_client.get("/api/v1/audit/?action=webhook.create"),
    ]
    for response in responses:
        assert response.status_code < 300, response.content
        assert SECRET.encode() not in response.content


@pytest.mark.parametrize("persona", ["owner", "teammate", "outsider"])
def test_viewers_and_editors_may_neither_read_nor_change_webhooks(world: World, persona: str) -> None:
    hook = _hook(world)
    client = world.client(persona)
    path = f"/api/v1/webhooks/{hook.pk}/"
    calls = [
        client.get("/api/v1/webhooks/"),
        client.post("/api/v1/webhooks/", BODY, format="json"),
        client.get(path),
        client.patch(path, {"active": False}, format="json"),
        client.delete(path),
        client.get(f"{path}deliveries/"),
        client.post(f"{path}test/"),
    ]
    for response in calls:
        error = _only_error(response, 403)
        assert error["code"] == "permission_denied" and "administrators" in error["message"]
    assert Webhook.objects.get(pk=hook.pk).active is True
    assert not AuditEntry.objects.filter(object_type="events.webhook").exists()


def test_anonymous_is_told_to_authenticate(world: World) -> None:
    response = world.client(None).get("/api/v1/webhooks/")
    assert _only_error(response, 401)["code"] == "not_authenticated"


def test_a_session_works_like_a_token_and_a_revoked_token_does_not(world: World) -> None:
    session = APIClient()
    session.force_authenticate(world.users["admin"])
    assert session.post("/api/v1/webhooks/", BODY, format="json").status_code == 201
    entry = AuditEntry.objects.get(action="webhook.create")
    assert entry.actor_name == "admin" and entry.token_name == ""  # no token: none recorded
    world.users["admin"].api_tokens.update(revoked_at=timezone.now())
    assert world.client("admin").get("/api/v1/webhooks/").status_code == 401


def test_an_admin_manages_only_webhooks_whose_whole_scope_they_administer(
    world: World, superuser_client: APIClient
) -> None:
    mine = _hook(world, name="mine")
    other_namespace = _hook(world, name="team-b", namespace="team-b")
    every_namespace = _hook(world, name="all-of-sim", namespace="*")
    every_cluster = _hook(world, name="global", cluster=None)
    client = world.client("admin")
    assert [h["name"] for h in client.get("/api/v1/webhooks/").json()["results"]] == ["mine"]
    assert client.get(f"/api/v1/webhooks/{mine.pk}/").status_code == 200
    for hook in (other_namespace, every_namespace, every_cluster):
        for response in (
            client.get(f"/api/v1/webhooks/{hook.pk}/"),
            client.patch(f"/api/v1/webhooks/{hook.pk}/", {"active": False}, format="json"),
            client.delete(f"/api/v1/webhooks/{hook.pk}/"),
            client.get(f"/api/v1/webhooks/{hook.pk}/deliveries/"),
            client.post(f"/api/v1/webhooks/{hook.pk}/test/"),
        ):
            assert _only_error(response, 404)["code"] == "not_found"
    # Widening one's own webhook beyond what one administers is refused like creating it.
    for change, field in (({"namespace": "*"}, "namespace"), ({"cluster": None}, "cluster")):
        error = _only_error(client.patch(f"/api/v1/webhooks/{mine.pk}/", change, format="json"), 403)
        assert error["field"] == field and "admin role" in error["message"]
        error = _only_error(client.post("/api/v1/webhooks/", {**BODY, **change}, format="json"), 403)
        assert error["field"] == field
    assert Webhook.objects.get(pk=mine.pk).namespace == NAMESPACE
    names = {h["name"] for h in superuser_client.get("/api/v1/webhooks/").json()["results"]}
    assert names == {"mine", "team-b", "all-of-sim", "global"}
    created = superuser_client.post("/api/v1/webhooks/", {**BODY, "cluster": None}, format="json")
    assert created.status_code == 201 and created.json()["cluster"] is None
    assert created.json()["namespace"] == NAMESPACE


@pytest.mark.parametrize(
    ("change", "field", "code", "allowed"),
    [
        ({"url": "ftp://hooks.example.com/x"}, "url", "invalid_url", ["http", "https"]),
        ({"url": "hooks.example.com/x"}, "url", "invalid_url", ["http", "https"]),
        ({"url": "https://user:pw@hooks.example.com/x"}, "url", "url_not_allowed", ["http", "https"]),
        ({"url": "https://hooks.example.com/" + "a" * 480}, "url", "too_long", None),
        ({"url": "https://hooks.example.com/a\nb"}, "url", "invalid_url", ["http", "https"]),
        ({"events": ["incident.opened", "job.created"]}, "events.1", "invalid_choice", KINDS),
        ({"events": "incident.opened"}, "events", "invalid_type", None),
        ({"namespace": "Team_A"}, "namespace", "invalid", None),
        ({"cluster": "nowhere"}, "cluster", "invalid_choice", ["sim"]),
        ({"secret": "short"}, "secret", "too_short", None),
        ({"secret": ""}, "secret", "blank", None),
        ({"name": "x" * 101}, "name", "too_long", None),
        ({"active": "maybe"}, "active", "invalid_type", None),
        ({"colour": "red"}, "colour", "unknown_field", None),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_what_is_allowed(
    world: World, change: dict[str, Any], field: str, code: str, allowed: list[str] | None
) -> None:
    client = world.client("admin")
    error = _only_error(client.post("/api/v1/webhooks/", {**BODY, **change}, format="json"), 400)
    assert (error["field"], error["code"]) == (field, code), error
    if allowed is not None:
        assert error["allowed"] == allowed
    hook = _hook(world)
    error = _only_error(client.patch(f"/api/v1/webhooks/{hook.pk}/", change, format="json"), 400)
    assert (error["field"], error["code"]) == (field, code), error
    assert not AuditEntry.objects.filter(object_type="events.webhook").exists()


@pytest.mark.parametrize("missing", ["name", "url", "secret"])
def test_create_needs_a_name_a_url_and_a_secret(world: World, missing: str) -> None:
    body = {key: value for key, value in BODY.items() if key != missing}
    error = _only_error(world.client("admin").post("/api/v1/webhooks/", body, format="json"), 400)
    assert (error["field"], error["code"]) == (missing, "missing_field")


@pytest.mark.parametrize("body", [[], "text", None])
def test_a_body_that_is_not_an_object_is_a_400(world: World, body: Any) -> None:
    response = world.client("admin").post(
        "/api/v1/webhooks/", json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 400 and response.json()["errors"]


def test_private_targets_are_refused_as_in_the_admin_unless_allowed(world: World, settings: Any) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    client = world.client("admin")
    for url in ("http://127.0.0.1:9000/hook", "http://169.254.169.254/latest/meta-data/"):
        error = _only_error(client.post("/api/v1/webhooks/", {**BODY, "url": url}, format="json"), 400)
        assert error["code"] == "url_not_allowed" and "WEBHOOK_ALLOW_PRIVATE_TARGETS" in error["message"]
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    response = client.post("/api/v1/webhooks/", {**BODY, "url": "http://127.0.0.1:9000/hook"}, format="json")
    assert response.status_code == 201


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/webhooks/{id}/",
        "/api/v1/webhooks/{id}/deliveries/",
        "/api/v1/webhooks/{id}/test/",
    ],
)
@pytest.mark.parametrize("unknown", ["999999", "999999999999999999", "99999999999999999999", "0", "abc"])
def test_unknown_ids_are_a_404(world: World, superuser_client: APIClient, path: str, unknown: str) -> None:
    method = "post" if path.endswith("test/") else "get"
    response = getattr(superuser_client, method)(path.format(id=unknown))
    assert _only_error(response, 404)["code"] == "not_found"
    if path.endswith("{id}/"):
        for verb in ("patch", "delete"):
            response = getattr(superuser_client, verb)(
                path.format(id=unknown), {"active": True}, format="json"
            )
            assert response.status_code == 404


def _delivery(hook: Webhook, minutes_ago: int, **fields: Any) -> WebhookDelivery:
    delivery = WebhookDelivery.objects.create(
        webhook=hook,
        delivery_id=uuid.uuid4(),
        kind="incident.opened",
        payload={"secret": "payload"},
        **fields,
    )
    created = timezone.now() - timedelta(minutes=minutes_ago)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(created_at=created)
    return delivery


def test_deliveries_are_listed_newest_first_paged_and_filtered_by_state(world: World) -> None:
    hook = _hook(world)
    other = _hook(world, name="other")
    old = _delivery(hook, 30, state="failed", attempts=8, last_status=503, last_error="HTTP 503 Unavailable")
    middle = _delivery(hook, 20, state="delivered", attempts=1, last_status=200)
    new = _delivery(hook, 10)
    _delivery(other, 5)
    client = world.client("admin")
    page = client.get(f"/api/v1/webhooks/{hook.pk}/deliveries/?limit=2").json()
    assert page["count"] == 3 and page["next"]
    assert [row["id"] for row in page["results"]] == [new.pk, middle.pk]
    rest = client.get(f"/api/v1/webhooks/{hook.pk}/deliveries/?limit=2&offset=2").json()["results"]
    assert rest == [
        {
            "id": old.pk,
            "delivery_id": str(old.delivery_id),
            "kind": "incident.opened",
            "state": "failed",
            "attempts": 8,
            "response_code": 503,
            "error": "HTTP 503 Unavailable",
            "created_at": rest[0]["created_at"],
            "delivered_at": None,
        }
    ]
    failed = client.get(f"/api/v1/webhooks/{hook.pk}/deliveries/?state=failed").json()["results"]
    assert [row["id"] for row in failed] == [old.pk]
    error = _only_error(client.get(f"/api/v1/webhooks/{hook.pk}/deliveries/?state=lost"), 400)
    assert (error["field"], error["allowed"]) == ("state", ["pending", "delivered", "failed"])


class _Receiver(BaseHTTPRequestHandler):
    received: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Receiver.received.append((dict(self.headers.items()), body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    _Receiver.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()


def test_a_test_message_goes_through_the_delivery_path_signed(
    world: World, receiver: str, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = _hook(world, url=receiver)
    with django_capture_on_commit_callbacks() as queued:
        response = world.client("admin").post(f"/api/v1/webhooks/{hook.pk}/test/")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["kind"] == "webhook.test" and body["state"] == "pending" and body["attempts"] == 0
    assert len(queued) == 1  # queued after commit, like every delivery
    entry = AuditEntry.objects.get(action="webhook.test")
    assert entry.object_id == str(hook.pk) and entry.after == {"delivery_id": body["delivery_id"]}

    # The queued callback is the outbox's own: run it with Celery eager (no broker in this test).
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)
    queued[0]()
    delivery = WebhookDelivery.objects.get(pk=body["id"])
    assert (delivery.state, delivery.attempts, delivery.last_status) == ("delivered", 1, 204)
    (headers, sent), *_ = _Receiver.received
    assert headers["X-Event"] == "webhook.test" and headers["X-Delivery-Id"] == body["delivery_id"]
    assert verify(SECRET, headers["X-Timestamp"], sent, headers["X-Signature"])
    assert json.loads(sent)["webhook"] == {"id": hook.pk, "name": "existing"}
    listed = world.client("admin").get(f"/api/v1/webhooks/{hook.pk}/deliveries/").json()["results"]
    assert [(row["state"], row["response_code"]) for row in listed] == [("delivered", 204)]

"""Issue #16 item 9 (webhooks): only http/https URLs, no loopback, link-local or private targets
unless ``WEBHOOK_ALLOW_PRIVATE_TARGETS``, checked when saved and again when sent; redirects are
never followed. A real receiver on 127.0.0.1 answers, so nothing is mocked."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from apps.events.models import Webhook, WebhookDelivery
from apps.events.webhook_urls import webhook_url_problem, webhook_url_save_problem
from apps.events.webhooks import delivery_attempt

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "url",
    [
        "ftp://hooks.example.com/x",
        "file:///etc/passwd",
        "gopher://127.0.0.1:6379/_FLUSHALL",
        "http://127.0.0.1:8000/admin/",
        "http://localhost/x",
        "http://[::1]/x",
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata (link-local)
        "http://10.0.0.5/x",
        "http://192.168.1.1/x",
        "http://0.0.0.0/x",
        "http:///no-host",
    ],
)
def test_refused_urls(url: str) -> None:
    assert webhook_url_problem(url, allow_private=False) is not None


def test_public_addresses_are_allowed_and_private_ones_when_configured() -> None:
    assert webhook_url_problem("https://93.184.216.34/hook", allow_private=False) is None
    assert webhook_url_problem("http://127.0.0.1:9/hook", allow_private=True) is None
    assert webhook_url_problem("ftp://127.0.0.1/hook", allow_private=True) is not None  # scheme still


@pytest.mark.parametrize(
    "url",
    ["https://user:pw@hooks.example.com/x", "https://user@hooks.example.com/x", "https://:pw@h.example/x"],
)
def test_a_saved_url_may_not_carry_credentials(url: str, settings: Any) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True  # refused even where private targets are allowed
    assert "credentials" in (webhook_url_save_problem(url) or "")
    assert webhook_url_save_problem("https://hooks.example.com/x") is None


def test_the_admin_form_refuses_a_url_with_credentials() -> None:
    root = User.objects.create_superuser("root", password="pw")
    client = Client()
    client.force_login(root)
    response = client.post(
        "/admin/events/webhook/add/",
        {
            "name": "x",
            "namespace": "*",
            "url": "https://u:p@hooks.example.com/",
            "secret": "k",
            "events": "[]",
        },
    )
    assert response.status_code == 200 and Webhook.objects.count() == 0
    assert b"credentials" in response.content


def test_the_admin_form_refuses_a_loopback_url(settings: Any) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    root = User.objects.create_superuser("root", password="pw")
    client = Client()
    client.force_login(root)
    response = client.post(
        "/admin/events/webhook/add/",
        {"name": "x", "namespace": "*", "url": "http://127.0.0.1:6379/", "secret": "k", "events": "[]"},
    )
    assert response.status_code == 200 and Webhook.objects.count() == 0
    assert b"loopback" in response.content or b"private" in response.content


class _Redirector(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_POST(self) -> None:
        type(self).hits.append(self.path)
        self.send_response(307 if self.path == "/hook" else 200)
        self.send_header("Location", "/internal-only")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def redirector() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirector)
    Thread(target=server.serve_forever, daemon=True).start()
    _Redirector.hits = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def _delivery(url: str) -> WebhookDelivery:
    hook = Webhook.objects.create(name=f"h-{uuid.uuid4().hex[:6]}", url=url, secret="k")
    return WebhookDelivery.objects.create(
        webhook=hook, delivery_id=uuid.uuid4(), kind="incident.opened", payload={}
    )


def test_redirects_are_not_followed(redirector: str, settings: Any) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True  # the receiver is local; the rule under test is redirects
    delivery = _delivery(f"{redirector}/hook")
    result = delivery_attempt(delivery_id=delivery.pk)
    assert result is not None and not result.delivered and not result.retryable
    assert result.status == 307 and "redirect" in result.error
    assert _Redirector.hits == ["/hook"]  # /internal-only was never requested
    delivery.refresh_from_db()
    assert delivery.state == WebhookDelivery.State.FAILED


def test_a_private_target_is_refused_at_send_time_too(redirector: str, settings: Any) -> None:
    """A row written before the rule (or a name that now resolves elsewhere) is checked again."""
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    delivery = _delivery(f"{redirector}/hook")
    result = delivery_attempt(delivery_id=delivery.pk)
    assert result is not None and not result.delivered and not result.retryable
    assert "private" in result.error or "loopback" in result.error
    assert _Redirector.hits == []

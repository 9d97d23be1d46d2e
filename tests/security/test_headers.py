"""Issue #16 item 9 (headers): the request id stored in audit entries is ours, a client's
``X-Request-ID`` is taken only from a trusted proxy; every page carries a Content-Security-Policy."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import pytest
from django.test import Client, override_settings

from apps.audit.models import AuditEntry
from tests.support.world import World

pytestmark = pytest.mark.django_db
BASE_TEMPLATE = Path(__file__).resolve().parents[2] / "frontend" / "templates" / "web" / "base.html"


def test_a_clients_request_id_is_not_stored(world: World) -> None:
    response = world.client("owner").put(
        f"/api/v1/jobs/{world.job.pk}/policy/",
        {"spec": {"strategies": ["dump"]}},
        format="json",
        HTTP_X_REQUEST_ID="forged-id-1",
    )
    assert response.status_code == 200
    ours = response["X-Request-ID"]
    assert ours != "forged-id-1" and re.fullmatch(r"[0-9a-f]{32}", ours)
    assert AuditEntry.objects.latest("id").request_id == ours


@override_settings(REQUEST_ID_TRUSTED_PROXIES=["10.1.1.1"])
def test_a_trusted_proxys_request_id_is_kept(world: World) -> None:
    client = world.client("owner")
    trusted = client.get("/api/v1/jobs/", HTTP_X_REQUEST_ID="edge-123", REMOTE_ADDR="10.1.1.1")
    assert trusted["X-Request-ID"] == "edge-123"
    other = client.get("/api/v1/jobs/", HTTP_X_REQUEST_ID="edge-123", REMOTE_ADDR="10.1.1.2")
    assert other["X-Request-ID"] != "edge-123"


@pytest.mark.parametrize("path", ["/login/", "/api/v1/", "/api/docs/", "/admin/login/", "/healthz"])
def test_every_response_carries_a_content_security_policy(path: str) -> None:
    policy = Client().get(path)["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if d.strip())
    assert directives["default-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'" and directives["object-src"] == "'none'"
    assert "'unsafe-inline'" not in directives["script-src"]
    assert "'unsafe-eval'" not in policy


def test_the_one_inline_script_is_allowed_by_its_hash_only() -> None:
    """base.html sets the colour theme before the first paint: its exact text is in script-src."""
    inline = re.findall(r"<script>(.*?)</script>", BASE_TEMPLATE.read_text(), re.S)
    assert len(inline) == 1
    digest = base64.b64encode(hashlib.sha256(inline[0].encode()).digest()).decode()
    policy = Client().get("/login/")["Content-Security-Policy"]
    assert f"'sha256-{digest}'" in policy

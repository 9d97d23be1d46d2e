"""Tokens (hashed, revocable, expiring, last-used), ``issue_token``, throttling per token, request ids."""

from __future__ import annotations

import hashlib
import logging
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from apps.accounts.models import ApiToken
from apps.accounts.services import token_issue
from apps.audit.models import AuditEntry
from tests.support.world import World

pytestmark = pytest.mark.django_db


def test_only_the_hash_and_prefix_of_a_key_are_stored(world: World) -> None:
    token, key = token_issue(world.users["owner"], "laptop")
    token.refresh_from_db()
    assert token.key_hash == hashlib.sha256(key.encode()).hexdigest() and token.prefix == key[:8]
    assert key not in {token.key_hash, token.prefix, token.name}


def test_created_key_is_shown_once_and_then_authenticates(world: World) -> None:
    client = world.client("owner")
    created = client.post("/api/v1/tokens/", {"name": "ci", "expires_in_days": 30}, format="json").json()
    assert created["key"].startswith(created["prefix"]) and created["active"] is True
    listed = client.get("/api/v1/tokens/").json()["results"]
    assert all("key" not in token for token in listed)
    fresh = world.client(None)
    fresh.credentials(HTTP_AUTHORIZATION=f"Token {created['key']}")
    assert fresh.get("/api/v1/jobs/").status_code == 200
    assert AuditEntry.objects.filter(action="token.issue", token_name="owner-ci").exists()


def test_a_revoked_token_gets_a_clear_401(world: World) -> None:
    client = world.client("owner")
    token = ApiToken.objects.get(name="owner-ci")
    assert client.delete(f"/api/v1/tokens/{token.pk}/").status_code == 204
    response = client.get("/api/v1/jobs/")
    assert response.status_code == 401
    assert "was revoked" in response.json()["errors"][0]["message"]


def test_an_expired_token_gets_a_clear_401(world: World) -> None:
    ApiToken.objects.filter(name="owner-ci").update(expires_at=timezone.now() - timedelta(minutes=1))
    response = world.client("owner").get("/api/v1/jobs/")
    assert response.status_code == 401 and "expired" in response.json()["errors"][0]["message"]


def test_last_used_is_written_at_most_once_a_minute(world: World, django_assert_num_queries: Any) -> None:
    client = world.client("owner")
    client.get("/api/v1/tokens/")
    first = ApiToken.objects.get(name="owner-ci").last_used_at
    assert first is not None
    client.get("/api/v1/tokens/")
    assert ApiToken.objects.get(name="owner-ci").last_used_at == first
    ApiToken.objects.filter(name="owner-ci").update(last_used_at=timezone.now() - timedelta(minutes=2))
    client.get("/api/v1/tokens/")
    assert ApiToken.objects.get(name="owner-ci").last_used_at > first


def test_issue_token_prints_a_working_key(world: World) -> None:
    out, err = StringIO(), StringIO()
    call_command(
        "issue_token", "teammate", "--name", "nightly", "--expires-days", "7", stdout=out, stderr=err
    )
    key = out.getvalue().strip()
    token = ApiToken.objects.get(name="nightly")
    assert token.key_hash == hashlib.sha256(key.encode()).hexdigest() and token.expires_at is not None
    assert "expires" in err.getvalue() and key not in err.getvalue()


def test_issue_token_for_an_unknown_user_fails_clearly(world: World) -> None:
    with pytest.raises(CommandError, match="no user named 'ghost'"):
        call_command("issue_token", "ghost")


def test_issue_token_unknown_user_exits_1_from_the_shell(world: World) -> None:
    import os
    import subprocess
    import sys

    from tests.support import REPO_ROOT
    from tests.support.processes import test_database_url

    # The test database: the command must find no such user there.
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "controlplane.settings.test",
        "DATABASE_URL": test_database_url(),
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "issue_token", "ghost-user-xyz"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 1 and "no user named" in result.stderr and result.stdout == ""


def test_throttling_is_per_token(world: World, settings: Any) -> None:
    from django.core.cache import cache

    cache.clear()
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token": "3/min"}}
    busy = world.client("owner")
    statuses = [busy.get("/api/v1/clusters/").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    throttled = busy.get("/api/v1/clusters/")
    assert throttled.json()["errors"][0]["code"] == "throttled" and int(throttled["Retry-After"]) > 0
    _, second_key = token_issue(world.users["owner"], "second pipeline")
    other = world.client(None)
    other.credentials(HTTP_AUTHORIZATION=f"Token {second_key}")
    assert other.get("/api/v1/clusters/").status_code == 200  # same user, different token: own budget
    cache.clear()


@pytest.mark.parametrize(
    ("incoming", "kept"),
    [("pipeline-123.abc:7", True), ("bad id with spaces", False), ("x" * 65, False), (None, False)],
)
def test_request_ids_are_echoed_or_made(
    world: World, settings: Any, incoming: str | None, kept: bool
) -> None:
    # Issue #16: a client's id is kept only from a trusted proxy (the test client is 127.0.0.1).
    settings.REQUEST_ID_TRUSTED_PROXIES = ["127.0.0.1"]
    headers = {"HTTP_X_REQUEST_ID": incoming} if incoming is not None else {}
    response = world.client("owner").get("/api/v1/jobs/", **headers)
    request_id = response["X-Request-ID"]
    assert (request_id == incoming) is kept and 1 <= len(request_id) <= 64


def test_request_ids_reach_the_logs(world: World, caplog: Any, settings: Any) -> None:
    from apps.core.middleware import RequestIdLogFilter

    settings.REQUEST_ID_TRUSTED_PROXIES = ["127.0.0.1"]  # issue #16: else the id is always ours

    handler_filter = RequestIdLogFilter()
    with caplog.at_level(logging.WARNING, logger="django.request"):
        world.client("owner").get("/api/v1/nope/", HTTP_X_REQUEST_ID="trace-me-1")
    records = [r for r in caplog.records if r.name == "django.request"]
    assert records and handler_filter.filter(records[-1]) and records[-1].request_id == "trace-me-1"

"""Issue #16 item 3: tokens are capped per user, a token minted with a token lives no longer than
its parent, and throttling counts per user as well as per token."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.utils import timezone

from apps.accounts.models import ApiToken
from apps.accounts.services import TooManyTokens, token_issue
from tests.support.world import World

pytestmark = pytest.mark.django_db


def test_a_user_may_hold_at_most_the_configured_number_of_active_tokens(world: World, settings: Any) -> None:
    settings.API_TOKENS_PER_USER = 3
    owner = world.users["owner"]  # holds one already ("owner-ci")
    client = world.client("owner")
    assert client.post("/api/v1/tokens/", {"name": "a"}, format="json").status_code == 201
    assert client.post("/api/v1/tokens/", {"name": "b"}, format="json").status_code == 201
    refused = client.post("/api/v1/tokens/", {"name": "c"}, format="json")
    assert refused.status_code == 400, refused.content
    error = refused.json()["errors"][0]
    assert error["code"] == "too_many_tokens" and "3" in error["message"]
    assert ApiToken.objects.filter(user=owner, revoked_at__isnull=True).count() == 3
    # Revoked and expired tokens do not count: revoking one makes room again.
    ApiToken.objects.filter(user=owner, name="a").update(revoked_at=timezone.now())
    ApiToken.objects.filter(user=owner, name="b").update(expires_at=timezone.now() - timedelta(seconds=1))
    assert client.post("/api/v1/tokens/", {"name": "d"}, format="json").status_code == 201
    with pytest.raises(TooManyTokens):  # the service enforces it for every entry point
        for index in range(3):
            token_issue(owner, f"cli-{index}")


def test_a_child_token_expires_no_later_than_its_parent(world: World) -> None:
    parent = ApiToken.objects.get(name="owner-ci")
    parent_expiry = timezone.now() + timedelta(days=2)
    ApiToken.objects.filter(pk=parent.pk).update(expires_at=parent_expiry)
    client = world.client("owner")
    for body in ({"name": "forever"}, {"name": "long", "expires_in_days": 30}):
        created = client.post("/api/v1/tokens/", body, format="json")
        assert created.status_code == 201, created.content
        child = ApiToken.objects.get(pk=created.json()["id"])
        assert child.expires_at is not None and child.expires_at <= parent_expiry, body
    shorter = client.post("/api/v1/tokens/", {"name": "short", "expires_in_days": 1}, format="json").json()
    assert ApiToken.objects.get(pk=shorter["id"]).expires_at < parent_expiry


def test_throttling_counts_per_user_across_tokens(world: World, settings: Any) -> None:
    cache.clear()
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"token": "4/min", "user": "6/min"},
    }
    first = world.client("owner")
    assert [first.get("/api/v1/clusters/").status_code for _ in range(4)] == [200, 200, 200, 200]
    _, key = token_issue(world.users["owner"], "second")
    second = world.client(None)
    second.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    # A fresh token has its own 4/min, but the user's 6/min is shared: minting tokens buys nothing.
    assert [second.get("/api/v1/clusters/").status_code for _ in range(3)] == [200, 200, 429]
    throttled = second.get("/api/v1/clusters/")
    assert throttled.json()["errors"][0]["code"] == "throttled"
    assert world.client("teammate").get("/api/v1/clusters/").status_code == 200  # others unaffected
    cache.clear()

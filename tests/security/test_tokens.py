"""Issue #16 item 3: tokens are capped per user, a token minted with a token lives no longer than
its parent, and throttling counts per user as well as per token. Issue #24 item 5: a token records
the token that minted it and is revoked with it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.models import ApiToken
from apps.accounts.services import TokenParentRevoked, TooManyTokens, token_issue
from apps.audit.models import AuditEntry
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


def _mint(key: str, name: str) -> tuple[int, str]:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    created = client.post("/api/v1/tokens/", {"name": name}, format="json")
    assert created.status_code == 201, created.content
    return created.json()["id"], created.json()["key"]


def _status_with(key: str) -> tuple[int, str]:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    response = client.get("/api/v1/tokens/")
    return response.status_code, response.content.decode()


def test_a_revoked_tokens_children_and_grandchildren_get_401(world: World) -> None:
    """Issue #24 item 5: a leaked token that minted children before it was revoked leaves nothing
    alive; a token minted by a signed-in user (no parent) is unaffected."""
    root = ApiToken.objects.get(name="owner-ci")
    child_id, child_key = _mint(world.keys["owner"], "child")
    grandchild_id, grandchild_key = _mint(child_key, "grandchild")
    unrelated, unrelated_key = token_issue(world.users["owner"], "from-the-browser")
    assert ApiToken.objects.get(pk=child_id).parent == root
    assert ApiToken.objects.get(pk=grandchild_id).parent_id == child_id
    assert unrelated.parent is None

    revoked = world.client("owner").delete(f"/api/v1/tokens/{root.pk}/")
    assert revoked.status_code == 204, revoked.content

    for key in (world.keys["owner"], child_key, grandchild_key):
        status, body = _status_with(key)
        assert status == 401, body
        assert "revoked" in body
    assert _status_with(unrelated_key)[0] == 200
    assert ApiToken.objects.filter(pk__in=[child_id, grandchild_id], revoked_at__isnull=True).count() == 0
    revocations = AuditEntry.objects.filter(action="token.revoke").count()
    assert revocations == 3  # each revoked token has its own audit entry


def test_a_revoked_token_cannot_mint_a_child_even_if_it_authenticated_first(world: World) -> None:
    """The parent row is the lock: a child minted while the parent is being revoked is refused."""
    root = ApiToken.objects.get(name="owner-ci")
    ApiToken.objects.filter(pk=root.pk).update(revoked_at=timezone.now())
    with pytest.raises(TokenParentRevoked):
        token_issue(world.users["owner"], "late-child", parent=root)


def test_a_token_revoked_in_the_admin_takes_its_children_along(world: World) -> None:
    from django.contrib.auth.models import User
    from django.test import Client

    root = ApiToken.objects.get(name="owner-ci")
    _, child_key = _mint(world.keys["owner"], "child")
    admin = Client()
    admin.force_login(User.objects.create_superuser("root-admin", password="pw"))
    now = timezone.now()
    changed = admin.post(
        f"/admin/accounts/apitoken/{root.pk}/change/",
        {
            "revoked_at_0": f"{now:%Y-%m-%d}",
            "revoked_at_1": f"{now:%H:%M:%S}",
            "expires_at_0": "",
            "expires_at_1": "",
        },
    )
    assert changed.status_code == 302, changed.content[:2000]
    assert _status_with(child_key)[0] == 401

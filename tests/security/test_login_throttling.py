"""Issue #16 item 4: failed sign-ins on ``/login/`` and ``/admin/login/`` are counted per user and
per address (django-axes, database handler); past the limit the next attempt is refused even with
the right password, until the cool-off ends."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db
LIMIT = 5


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice", password="right-password-1")


def attempt(path: str, address: str, username: str, password: str) -> int:
    client = Client(REMOTE_ADDR=address)
    return client.post(path, {"username": username, "password": password}).status_code


@override_settings(AXES_FAILURE_LIMIT=LIMIT)
@pytest.mark.parametrize("path", ["/login/", "/admin/login/"])
def test_failures_per_user_lock_that_user_from_every_address(path: str, alice: User) -> None:
    for index in range(LIMIT - 1):
        assert attempt(path, f"10.0.0.{index + 1}", "alice", "wrong") == 200  # the form again
    assert attempt(path, "10.0.0.99", "alice", "wrong") == 429  # the LIMIT-th failure locks
    # A new address, the right password: still refused while the user is locked.
    assert attempt(path, "10.9.9.9", "alice", "right-password-1") == 429


@override_settings(AXES_FAILURE_LIMIT=LIMIT)
def test_failures_per_address_lock_that_address_for_every_user(alice: User) -> None:
    User.objects.create_user("bob", password="bobs-password-1")
    for index in range(LIMIT - 1):
        assert attempt("/login/", "10.0.0.7", f"guess-{index}", "wrong") == 200
    assert attempt("/login/", "10.0.0.7", "guess-last", "wrong") == 429
    assert attempt("/login/", "10.0.0.7", "bob", "bobs-password-1") == 429
    assert attempt("/login/", "10.0.0.8", "bob", "bobs-password-1") == 302  # another address is fine


@override_settings(AXES_FAILURE_LIMIT=LIMIT)
def test_a_success_before_the_limit_resets_the_count(alice: User) -> None:
    for _ in range(LIMIT - 1):
        attempt("/login/", "10.0.0.3", "alice", "wrong")
    assert attempt("/login/", "10.0.0.3", "alice", "right-password-1") == 302
    for _ in range(LIMIT - 1):
        attempt("/login/", "10.0.0.3", "alice", "wrong")
    assert attempt("/login/", "10.0.0.3", "alice", "right-password-1") == 302


def test_programmatic_logins_without_a_request_still_work(alice: User, client: Any) -> None:
    """Tests and scripts that call ``authenticate()`` without a request are not network sign-ins."""
    assert client.login(username="alice", password="right-password-1")

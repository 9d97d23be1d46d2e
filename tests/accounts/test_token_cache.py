"""API token lookups kept per process and dropped at PostgreSQL's notices (apps/accounts/token_cache.py).

These tests commit (``transactional_db``): notices are sent at commit. A change made "elsewhere" is
made on a psycopg connection of its own, as another process (the admin, psql, another web process)
would make it.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import Group, User
from django.db import connection, transaction
from django.test import override_settings
from rest_framework.exceptions import AuthenticationFailed

from apps.accounts import token_cache
from apps.accounts.authentication import TokenAuthentication
from apps.accounts.models import ApiToken, NamespaceGrant, Role
from apps.accounts.services import hash_key, token_issue
from apps.jobs.models import Cluster
from tests.support.world import grant, make_user

pytestmark = pytest.mark.django_db(transaction=True)
migration = importlib.import_module("apps.accounts.migrations.0002_token_lookup_notices")

# A change committed elsewhere must take effect here within this (it takes milliseconds).
NOTICE_DEADLINE_SECONDS = 2.0


def _wait_for(condition: Callable[[], bool], timeout: float, what: str) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.002)
    return time.monotonic() - started


def _params() -> dict[str, Any]:
    return token_cache._listener_params()  # the test database's, as psycopg takes them


@pytest.fixture
def cache_on() -> Iterator[None]:
    with override_settings(AUTH_TOKEN_CACHE=True):
        try:
            token_cache.lookup_generation()  # starts the listener
            _wait_for(token_cache.listening_proven, 10, "the listener's first beat came back")
            yield
        finally:
            token_cache.stop_listening()  # its connection must not hold the test database open


@pytest.fixture
def elsewhere() -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(**_params(), autocommit=True) as conn:
        yield conn


def _authenticate(key: str) -> tuple[User, ApiToken]:
    user, token = TokenAuthentication().authenticate_key(key)
    return user, token


def _kept(key: str) -> bool:
    cache = token_cache._cache
    return cache is not None and cache.get(hash_key(key)) is not None


def _authenticate_and_keep(key: str) -> tuple[User, ApiToken]:
    """Authenticate until the lookup is kept: the notices of the test's own setup (its user, grant
    and token, committed just before) may still be on their way, each dropping every copy."""
    found: list[tuple[User, ApiToken]] = []

    def kept() -> bool:
        found.append(_authenticate(key))
        return _kept(key)

    _wait_for(kept, NOTICE_DEADLINE_SECONDS, "the lookup kept")
    return found[-1]


@pytest.fixture
def reader() -> tuple[User, str]:
    user = make_user("reader")
    grant(Role.VIEWER, user=user, cluster=Cluster.objects.create(name="a"), namespace="ns-1")
    return user, token_issue(user, "pipeline")[1]


def test_a_copy_answers_as_the_database_did_and_only_when_it_may(
    cache_on: None, reader: tuple[User, str], django_assert_num_queries: Any
) -> None:
    """Field by field the database's answer, with no statement; but not inside a transaction, not
    once the listening is unproven, and not kept when a notice came during its statement. (One
    test for the four: each test that commits costs a flush of every table, ~1.3 s.)"""
    from apps.accounts import selectors

    user, key = reader
    first_user, first_token = _authenticate_and_keep(key)  # the database's answer, kept
    with django_assert_num_queries(0):
        again_user, again_token = _authenticate(key)
    assert again_token is not first_token and again_user is not first_user  # this request's own
    for field in ApiToken._meta.concrete_fields:
        assert getattr(again_token, field.attname) == getattr(first_token, field.attname), field.name
    for field in User._meta.concrete_fields:
        assert getattr(again_user, field.attname) == getattr(first_user, field.attname), field.name
    with django_assert_num_queries(0):
        rows = selectors.grant_rows(again_user)
    assert rows == selectors._GRANT_ROWS(user.pk) and len(rows) == 1

    # Inside a transaction the database answers (the request may see its own uncommitted writes).
    with transaction.atomic(), django_assert_num_queries(1):
        _authenticate(key)

    # Unproven listening: the copy is there but not used; used again once a beat comes back.
    cache = token_cache._process_cache()
    with cache.lock:
        cache.proven_until = 0.0  # as if no beat came back for PROVEN_FOR_SECONDS
        kept = cache.entries.get(hash_key(key))
    unused = token_cache.cached_lookup(hash_key(key))
    assert kept is not None and unused is None
    _wait_for(token_cache.listening_proven, 5, "the next beat came back")
    _authenticate_and_keep(key)
    assert token_cache.cached_lookup(hash_key(key)) is not None

    # A lookup that overlapped a notice is not kept.
    other = "0" * 64
    lookup = token_cache.CachedLookup(token=(), user=(), grants_json=None)
    generation = token_cache.lookup_generation()
    cache.drop_all()  # a notice arrived while the statement ran
    token_cache.remember(other, lookup, generation)
    assert cache.get(other) is None
    token_cache.remember(other, lookup, token_cache.lookup_generation())
    assert cache.get(other) is lookup


def _revoke(conn: psycopg.Connection[Any], user: User, key: str) -> None:
    conn.execute("UPDATE accounts_apitoken SET revoked_at = now() WHERE key_hash = %s", (hash_key(key),))


def _disable(conn: psycopg.Connection[Any], user: User, key: str) -> None:
    conn.execute("UPDATE auth_user SET is_active = false WHERE id = %s", (user.pk,))


def _delete_token(conn: psycopg.Connection[Any], user: User, key: str) -> None:
    conn.execute("DELETE FROM accounts_apitoken WHERE key_hash = %s", (hash_key(key),))


def _grant(conn: psycopg.Connection[Any], user: User, key: str) -> None:
    conn.execute(
        "INSERT INTO accounts_namespacegrant (role, user_id, namespace, from_oidc, created_at)"
        " VALUES ('admin', %s, '*', false, now())",
        (user.pk,),
    )


def _join(conn: psycopg.Connection[Any], user: User, key: str) -> None:
    conn.execute(
        "INSERT INTO auth_user_groups (user_id, group_id) VALUES (%s, %s)",
        (user.pk, Group.objects.create(name="admins").pk),
    )


def _drop_grants(conn: psycopg.Connection[Any], user: User, key: str) -> None:
    conn.execute("TRUNCATE accounts_namespacegrant")


ELSEWHERE = {
    "token-revoked": _revoke,
    "user-disabled": _disable,
    "token-deleted": _delete_token,
    "grant-added": _grant,
    "joined-a-group": _join,
    "grants-truncated": _drop_grants,
}


def test_every_kind_of_change_committed_elsewhere_drops_the_copy(
    cache_on: None, elsewhere: psycopg.Connection[Any]
) -> None:
    from apps.accounts import selectors

    cluster = Cluster.objects.create(name="a")
    readers = {}
    for kind in ELSEWHERE:
        user = make_user(f"reader-{kind}")
        grant(Role.VIEWER, user=user, cluster=cluster, namespace="ns-1")
        readers[kind] = user, token_issue(user, "pipeline")[1]
    for kind, change in ELSEWHERE.items():
        user, key = readers[kind]
        _authenticate_and_keep(key)
        change(elsewhere, user, key)
        took = _wait_for(lambda key=key: not _kept(key), NOTICE_DEADLINE_SECONDS, f"{kind}: the copy dropped")
        print(f"{kind}: dropped {took * 1000:.1f} ms after the commit")
        if change in (_revoke, _disable, _delete_token):
            with pytest.raises(AuthenticationFailed):
                _authenticate(key)
            continue
        authenticated, _ = _authenticate(key)
        rows = selectors.grant_rows(authenticated)
        assert sorted(rows, key=repr) == sorted(selectors._GRANT_ROWS(user.pk), key=repr), kind
        assert len(rows) == {_grant: 2, _join: 1, _drop_grants: 0}[change], kind


def test_a_change_made_here_takes_effect_at_once_and_a_bulk_update_by_its_notice(
    cache_on: None, reader: tuple[User, str]
) -> None:
    """The API's revocation (an ORM save) drops this process's copies before and after its commit,
    without waiting for the notice; ``QuerySet.update`` sends no signal, its notice drops them."""
    from apps.accounts.services import token_revoke

    user, key = reader
    _, token = _authenticate_and_keep(key)
    token_revoke(ApiToken.objects.get(pk=token.pk))
    with pytest.raises(AuthenticationFailed, match="was revoked"):
        _authenticate(key)
    other = token_issue(user, "another")[1]
    _authenticate_and_keep(other)
    User.objects.filter(pk=user.pk).update(is_active=False)
    _wait_for(lambda: not _kept(other), NOTICE_DEADLINE_SECONDS, "the copy dropped")
    with pytest.raises(AuthenticationFailed, match="disabled"):
        _authenticate(other)


def test_a_lost_listener_connection_drops_every_copy_and_listens_again(
    cache_on: None, reader: tuple[User, str], elsewhere: psycopg.Connection[Any]
) -> None:
    _, key = reader
    _authenticate_and_keep(key)
    listener = token_cache._process_cache().backend_pid
    assert listener is not None
    elsewhere.execute("SELECT pg_terminate_backend(%s)", (listener,))
    _wait_for(lambda: not _kept(key), NOTICE_DEADLINE_SECONDS, "the copies dropped")
    _wait_for(token_cache.listening_proven, 10, "listening again")
    # Changes made while nobody listened are not missed: the copies went with the connection.
    _revoke(elsewhere, reader[0], key)
    with pytest.raises(AuthenticationFailed, match="was revoked"):
        _authenticate(key)


@pytest.mark.django_db  # the writer's own connection commits; the test's rows need not
def test_writes_that_do_not_change_a_verdict_are_not_announced(
    reader: tuple[User, str], elsewhere: psycopg.Connection[Any]
) -> None:
    """A token's last_used_at (written by the lookup, once a minute per token) and a user's last_login
    send no notice; every other column of the two tables does."""
    elsewhere.execute(f"LISTEN {token_cache.CHANNEL}")

    def notices() -> list[str]:
        return [notice.payload for notice in elsewhere.notifies(timeout=0.2)]

    with psycopg.connect(**_params(), autocommit=True) as writer:
        writer.execute("UPDATE accounts_apitoken SET last_used_at = now()")
        writer.execute("UPDATE auth_user SET last_login = now()")
        assert notices() == []
        writer.execute("UPDATE accounts_apitoken SET name = name")
        assert notices() == ["accounts_apitoken"]
        with writer.transaction():  # one notice per transaction and table
            writer.execute("UPDATE auth_user SET email = email")
            writer.execute("UPDATE auth_user SET is_staff = is_staff")
        assert notices() == ["auth_user"]


@pytest.mark.django_db
def test_every_column_but_the_bookkeeping_is_watched() -> None:
    """A column added to tokens or users later must be announced too (or named here as not read)."""
    not_read = {"accounts_apitoken": {"last_used_at"}, "auth_user": {"last_login"}}
    for model in (ApiToken, User):
        table = model._meta.db_table
        columns = {field.column for field in model._meta.concrete_fields}
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT event_object_column FROM information_schema.triggered_update_columns"
                " WHERE event_object_table = %s AND trigger_name = %s",
                (table, f"{table}_token_lookup_changed"),
            )
            watched = {row[0] for row in cursor.fetchall()}
        assert watched == columns - not_read[table], table
    for model in (NamespaceGrant, Group, User.groups.through):
        table = model._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT string_agg(event_manipulation, ',' ORDER BY event_manipulation)"
                " FROM information_schema.triggers WHERE event_object_table = %s AND trigger_name = %s",
                (table, f"{table}_token_lookup_changed"),
            )
            assert cursor.fetchone()[0] == "DELETE,INSERT,UPDATE", table  # TRUNCATE is not listed there
    assert set(migration.WATCHED) == {
        "accounts_apitoken",
        "auth_user",
        "accounts_namespacegrant",
        "auth_user_groups",
        "auth_group",
    }

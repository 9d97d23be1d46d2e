"""API tokens looked up once per process instead of once per request, kept true by PostgreSQL (#26).

Every API request looked its token up in the database (the token, its user and the user's grants in
one statement): a round trip and two model instances per request, about a sixth of a job detail's
CPU (bench/profile_api.py). Here each web process keeps what that statement returned, per key hash,
and uses it only while it can be sure the rows have not changed since:

- **Every change is announced.** Statement triggers on the tables the lookup reads (tokens, users,
  grants, group memberships, groups; migration ``accounts 0002``) ``NOTIFY controlplane_auth`` in the
  writing transaction, so the notice goes out when it commits, whatever wrote it: the ORM, a bulk
  update, the admin, psql. The token's ``last_used_at`` (written at most once a minute per token by
  the lookup itself) and a user's ``last_login`` are left out: nothing of the lookup's verdict
  depends on them.
- **Each process listens**, on a connection of its own (a daemon thread), and drops every copy at
  each notice. A change committed by this process also drops them at once, before and after its
  commit (signals below), so this process's next request sees it.
- **A copy is used only while the listening is proven**: every second the thread sends a notice to
  a channel of its own on the same connection and waits for it to come back. Copies are used for
  three seconds after the last one came back; a silent connection (a cut network, a pooler that does
  not forward notices, such as PgBouncer in transaction mode) stops their use within that, and every
  request goes to the database as before. After a reconnection every copy is dropped (notices may
  have been missed).
- **A lookup that overlapped a change is not kept**: a copy is stored only if no notice arrived (and
  the listener did not reconnect) between the moment its statement was sent and the moment it is
  stored.
- **Never inside a transaction** (a request in an atomic block may see its own uncommitted writes;
  so does every test that runs in one): the database answers.

What it costs: a revocation (or a disabled user, or a changed grant) committed in another process
takes effect here when its notice arrives (a few milliseconds; tests/accounts/test_token_cache.py
measures it), instead of at the next statement; with the listening lost, within three seconds.
Expiry is checked against the clock on every request, as before. ``AUTH_TOKEN_CACHE=false`` turns
it off; it is off on other databases than PostgreSQL.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import psycopg
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import connection, transaction
from django.db.models.signals import m2m_changed, post_delete, post_save

from apps.accounts.models import ApiToken, NamespaceGrant
from apps.cluster.backoff import Backoff
from apps.core import metrics

log = logging.getLogger(__name__)

CHANNEL = "controlplane_auth"  # the triggers' channel (migration accounts 0002 names it too)
BEAT_SECONDS = 1.0
PROVEN_FOR_SECONDS = 3.0  # copies are used this long after a beat sent came back
KEPT = 10_000  # tokens per process (each ~1 KB)


@dataclass
class CachedLookup:
    """What the token lookup returned: the token's and its user's column values, the grants' JSON."""

    token: tuple[Any, ...]
    user: tuple[Any, ...]
    grants_json: str | None


class _TokenCache:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.entries: OrderedDict[str, CachedLookup] = OrderedDict()
        self.generation = 0  # moves at every notice, reconnection and local change
        self.proven_until = 0.0  # time.monotonic(): copies are used until then
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.backend_pid: int | None = None  # the listening connection's, for pg_stat_activity

    def usable(self) -> bool:
        return time.monotonic() < self.proven_until

    def drop_all(self) -> None:
        with self.lock:
            self.generation += 1
            self.entries.clear()

    def get(self, key_hash: str) -> CachedLookup | None:
        with self.lock:
            found = self.entries.get(key_hash)
            if found is not None:
                self.entries.move_to_end(key_hash)
            return found

    def put(self, key_hash: str, lookup: CachedLookup, generation: int) -> None:
        with self.lock:
            if generation != self.generation or not self.usable():
                return  # a change (or a reconnection) may have come between the statement and now
            self.entries[key_hash] = lookup
            while len(self.entries) > KEPT:
                self.entries.popitem(last=False)

    def start(self) -> None:
        self.thread = threading.Thread(target=self._listen, name="auth-token-notices", daemon=True)
        self.thread.start()

    def _listen(self) -> None:
        backoff = Backoff(initial=0.5, maximum=30.0)
        beats = f"{CHANNEL}_{uuid.uuid4().hex}"  # this process's own channel: nobody else is woken
        while not self.stop.is_set():
            try:
                with psycopg.connect(**_listener_params(), autocommit=True) as conn:
                    self.backend_pid = conn.info.backend_pid
                    conn.execute(f"LISTEN {CHANNEL}")
                    conn.execute(f"LISTEN {beats}")
                    self.drop_all()  # anything changed while nobody listened
                    backoff.reset()
                    self._receive(conn, beats)
            except Exception as exc:  # the database is down or restarting: copies unused until proven
                self.proven_until = 0.0
                self.drop_all()
                log.warning("API token notices: listening failed (%s); lookups go to the database", exc)
                self.stop.wait(backoff.next_delay())
        self.proven_until = 0.0
        self.drop_all()

    def _receive(self, conn: psycopg.Connection[Any], beats: str) -> None:
        sent: dict[str, float] = {}
        number = 0
        next_beat = 0.0
        while not self.stop.is_set():
            now = time.monotonic()
            if now >= next_beat:
                number += 1
                sent[str(number)] = now
                conn.execute("SELECT pg_notify(%s, %s)", (beats, str(number)))
                next_beat = now + BEAT_SECONDS
                for stale in [n for n, at in sent.items() if now - at > PROVEN_FOR_SECONDS]:
                    del sent[stale]
            for notice in conn.notifies(timeout=max(0.0, next_beat - time.monotonic())):
                if notice.channel == beats:
                    at = sent.pop(notice.payload, None)
                    if at is not None:  # the connection carried a notice both ways since ``at``
                        self.proven_until = max(self.proven_until, at + PROVEN_FOR_SECONDS)
                else:
                    self.drop_all()
                    metrics.TOKEN_CACHE_NOTICES.inc()
                if self.stop.is_set():
                    return


def _listener_params() -> dict[str, Any]:
    params = dict(connection.get_connection_params())
    for django_only in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(django_only, None)
    params["application_name"] = "controlplane-auth-notices"
    return params


_cache: _TokenCache | None = None
_cache_lock = threading.Lock()


def _process_cache() -> _TokenCache:
    global _cache
    with _cache_lock:
        # A forked child inherits no thread: it starts its own listener.
        if _cache is None or _cache.pid != os.getpid():
            _cache = _TokenCache()
            _cache.start()
        return _cache


def _in_use() -> bool:
    return settings.AUTH_TOKEN_CACHE and connection.vendor == "postgresql" and not connection.in_atomic_block


def lookup_generation() -> int | None:
    """Taken before the lookup's statement is sent (``remember`` compares it); None: not in use."""
    if not _in_use():
        return None
    return _process_cache().generation


def cached_lookup(key_hash: str) -> CachedLookup | None:
    """The kept lookup of ``key_hash``, if one may be used now."""
    if not _in_use():
        metrics.TOKEN_CACHE_OFF.inc()
        return None
    cache = _process_cache()
    found = cache.get(key_hash) if cache.usable() else None
    (metrics.TOKEN_CACHE_HITS if found is not None else metrics.TOKEN_CACHE_MISSES).inc()
    return found


def remember(key_hash: str, lookup: CachedLookup, generation: int | None) -> None:
    """Keep ``lookup`` unless something changed since ``generation`` was taken."""
    if generation is not None and _cache is not None and _cache.pid == os.getpid():
        _cache.put(key_hash, lookup, generation)


def token_columns(token: ApiToken) -> tuple[Any, ...]:
    return tuple(getattr(token, name) for name in _TOKEN_COLUMNS)


def user_columns(user: User) -> tuple[Any, ...]:
    return tuple(getattr(user, name) for name in _USER_COLUMNS)


def token_from(lookup: CachedLookup) -> ApiToken:
    """A fresh ``ApiToken`` (with its ``user``) of this request, as the database would have made it."""
    token = ApiToken.from_db(connection.alias, _TOKEN_COLUMNS, lookup.token)
    token.user = User.from_db(connection.alias, _USER_COLUMNS, lookup.user)
    return token


_TOKEN_COLUMNS = [field.attname for field in ApiToken._meta.concrete_fields]
_USER_COLUMNS = [field.attname for field in User._meta.concrete_fields]


def stop_listening(timeout: float = 5.0) -> None:
    """End this process's listener and drop its copies (tests; a process shutting down)."""
    global _cache
    with _cache_lock:
        cache, _cache = _cache, None
    if cache is not None:
        cache.stop.set()
        if cache.thread is not None:
            cache.thread.join(timeout)


def listening_proven() -> bool:
    return _cache is not None and _cache.pid == os.getpid() and _cache.usable()


def _changed_here(update_fields: frozenset[str] | None = None, **_: object) -> None:
    if update_fields is not None and update_fields <= _NOT_READ:
        return  # a sign-in's last_login: the triggers leave it out too
    # Dropped now (so no request of this process uses a copy while the change is in flight) and again
    # once it commits (a lookup in between read the rows as they were: not kept past the commit).
    if _cache is not None:
        _cache.drop_all()
        transaction.on_commit(_cache.drop_all)


_NOT_READ = frozenset({"last_login", "last_used_at"})
for _signal in (post_save, post_delete):
    for _model in (ApiToken, User, NamespaceGrant, Group):
        _signal.connect(_changed_here, sender=_model, dispatch_uid=f"token-cache-{_model.__name__}-{_signal}")
m2m_changed.connect(_changed_here, sender=User.groups.through, dispatch_uid="token-cache-memberships")

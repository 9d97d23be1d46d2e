"""Readiness checks as a small registry: named functions that answer ``"ok"`` or ``"error: ..."``.

``/readyz`` (and its old name ``/healthz``) runs every registered check; ``/livez`` runs none (a process
that answers HTTP is alive: restarting it cannot fix a database outage, so liveness never looks at one).
Another process or app adds its own dependency with ``register_check("name", fn)``.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.db import connection

Check = Callable[[], str]

OK = "ok"
_CHECKS: dict[str, Check] = {}


def register_check(name: str, check: Check) -> Check:
    """Add (or replace) the readiness check called ``name``; returns it so it can decorate."""
    _CHECKS[name] = check
    return check


def registered_checks() -> tuple[str, ...]:
    return tuple(_CHECKS)


def run_checks() -> dict[str, str]:
    """Every check's answer by name; a check that raises answers with the exception's class."""
    results: dict[str, str] = {}
    for name, check in _CHECKS.items():
        try:
            results[name] = check()
        except Exception as exc:  # any error means "not ready"; say which, never a 500
            results[name] = f"error: {exc.__class__.__name__}"
    return results


def check_database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return OK


def check_redis() -> str:
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=0.5, socket_timeout=0.5)
    try:
        client.ping()
    finally:
        client.close()
    return OK


register_check("database", check_database)
register_check("redis", check_redis)


def check_threads() -> str:
    """The supervised threads of this process: a dead or crash-looping one takes it out of service."""
    from apps.core.supervision import supervised_threads_ready

    return OK if supervised_threads_ready() else "error: a supervised thread is dead or crash-looping"


register_check("threads", check_threads)

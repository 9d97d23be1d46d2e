"""Liveness and readiness: is the process up, can it reach its database and Redis."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse

from apps.core.supervision import supervised_threads_ready, supervised_threads_status


def _check_database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return "ok"
    except Exception as exc:  # any driver error means "not ready"; say which
        return f"error: {exc.__class__.__name__}"


def _check_redis() -> str:
    import redis

    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=0.5, socket_timeout=0.5).ping()
        return "ok"
    except Exception as exc:
        return f"error: {exc.__class__.__name__}"


def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the database answers. Redis and the supervised threads are reported but do not fail
    it: ``/healthz`` is also the liveness probe, and ``supervised_threads_ready`` belongs to
    readiness (``/readyz``), where a crash-looping thread takes the pod out of service."""
    threads_ok = supervised_threads_ready()
    checks = {
        "database": _check_database(),
        "redis": _check_redis(),
        "threads": "ok" if threads_ok else "error: a supervised thread is dead or crash-looping",
    }
    healthy = checks["database"] == "ok"
    return JsonResponse(
        {
            "status": "ok" if healthy else "unavailable",
            "checks": checks,
            "threads": supervised_threads_status(),
        },
        status=200 if healthy else 503,
    )

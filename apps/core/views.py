"""Liveness and readiness for the kubelet: ``/livez`` (the process answers), ``/readyz`` (its dependencies).

``/healthz`` is kept as an alias of ``/readyz`` for probes and monitors written before the split.
These paths are answered by ``apps.core.probes.ProbeMiddleware`` before host validation, so the
kubelet's ``Host: <pod IP>:<port>`` is accepted; the views below stay routable for tests and tools.
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from apps.core.health import OK, run_checks
from apps.core.supervision import supervised_threads_status


def livez(request: HttpRequest) -> JsonResponse:
    """200 while the process serves requests; touches no database, Redis or cluster."""
    return JsonResponse({"status": OK})


def readyz(request: HttpRequest) -> JsonResponse:
    """200 when every registered check (database, Redis, ...) answers ok; 503 naming the failing ones."""
    checks = run_checks()
    ready = all(answer == OK for answer in checks.values())
    return JsonResponse(
        {"status": OK if ready else "unavailable", "checks": checks, "threads": supervised_threads_status()},
        status=200 if ready else 503,
    )


healthz = readyz

"""``GET /metrics`` of the web process: Prometheus text format, for the bearer of ``METRICS_TOKEN``.

What it serves is this process's registry (``apps/core/metrics.py`` names every metric): request
metrics from ``django-prometheus``, the websocket stream's counters, admission latency, and whatever
else this process did. A scrape renders counters held in memory and issues no database query (issue
#27; a test counts them): the ingester, the decider and the Celery workers serve their own metrics on
``METRICS_PORT``, and Prometheus adds the processes up. Without ``DEBUG`` the endpoint needs
``METRICS_TOKEN``; with none configured it refuses and says so.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from apps.core.metrics import REGISTRY


def metrics_view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics``: Prometheus text format, for the bearer of ``METRICS_TOKEN``.

    Only a ``DEBUG`` run without a token configured serves anyone: the series name clusters and
    reveal activity.
    """
    token = settings.METRICS_TOKEN
    if token:
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), token.encode()):
            return HttpResponse(
                "metrics token required: Authorization: Bearer <METRICS_TOKEN>\n",
                status=401,
                content_type="text/plain",
                headers={"WWW-Authenticate": "Bearer"},
            )
    elif not settings.DEBUG:
        return HttpResponse(
            "/metrics is off: set METRICS_TOKEN and scrape with Authorization: Bearer <token>\n",
            status=403,
            content_type="text/plain",
        )
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)

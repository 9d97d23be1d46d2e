"""``GET /metrics``: Prometheus text format — ingest lag, events by kind, push latency, sync failures.

Events are stored by the ingester and the workers, not the web process that serves ``/metrics``, so
totals come from the database at scrape time (one grouped query each); the per-process counters of
``apps.events.metrics`` (socket frames, resyncs, broadcast failures) describe the process serving them.

A scrape is cheap (issue #16): the database gauges are computed at most once per
``METRICS_CACHE_SECONDS`` per process and served from memory in between, so several Prometheus
replicas, or anyone holding the token, cannot turn scrapes into load on the database. Without
``DEBUG`` the endpoint needs ``METRICS_TOKEN``; with none configured it refuses and says so.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, Max
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from apps.core.supervision import SupervisedThreadsCollector
from apps.events.metrics import REGISTRY

LAG_WINDOW = timedelta(minutes=5)
PUSH_WINDOW = timedelta(hours=1)


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


class DatabaseCollector(Collector):
    """Gauges read from the system of record when Prometheus scrapes."""

    def describe(self) -> list[GaugeMetricFamily]:
        return []  # no queries at import time; names are known only at scrape time

    def __init__(self) -> None:
        self.lock = threading.Lock()  # one scrape computes, concurrent ones wait for its result
        self.cached: list[GaugeMetricFamily] = []
        self.computed_at = float("-inf")

    def collect(self) -> Iterator[GaugeMetricFamily]:
        ttl = settings.METRICS_CACHE_SECONDS
        with self.lock:
            if time.monotonic() - self.computed_at >= ttl or not self.cached:
                self.cached = list(self._compute())
                self.computed_at = time.monotonic()
            families = self.cached
        yield from families

    def reset(self) -> None:
        with self.lock:
            self.cached, self.computed_at = [], float("-inf")

    def _compute(self) -> Iterator[GaugeMetricFamily]:
        from apps.events.models import IngestCursor, JobEvent
        from apps.policies.models import PolicySync

        now = timezone.now()
        by_kind = GaugeMetricFamily("controlplane_events_total", "Stored events by kind", labels=["kind"])
        for row in JobEvent.objects.values("kind").annotate(n=Count("id")).order_by():
            by_kind.add_metric([row["kind"]], row["n"])
        yield by_kind

        lag = GaugeMetricFamily(
            "controlplane_ingest_lag_seconds",
            "stored_at - occurred_at of events stored in the last 5 minutes",
            labels=["source", "quantile"],
        )
        recent = JobEvent.objects.filter(stored_at__gte=now - LAG_WINDOW).values_list(
            "source", "occurred_at", "stored_at"
        )[:20_000]
        per_source: dict[str, list[float]] = {}
        for source, occurred, stored in recent:
            per_source.setdefault(source, []).append(max(0.0, (stored - occurred).total_seconds()))
        for source, values in sorted(per_source.items()):
            for q in (0.5, 0.99):
                lag.add_metric([source, str(q)], _percentile(values, q))
        yield lag

        cursor_age = GaugeMetricFamily(
            "controlplane_ingest_cursor_age_seconds",
            "Seconds since a watch cursor last advanced",
            labels=["cluster", "source"],
        )
        for cluster, source, updated in IngestCursor.objects.values_list(
            "cluster__name", "source", "updated_at"
        ):
            cursor_age.add_metric([cluster, source], (now - updated).total_seconds())
        yield cursor_age

        push = GaugeMetricFamily(
            "controlplane_policy_push_latency_seconds",
            "Policy save → applied, pushes finished in the last hour",
            labels=["quantile"],
        )
        finished = PolicySync.objects.filter(finished_at__gte=now - PUSH_WINDOW, state="applied").values_list(
            "queued_at", "finished_at"
        )[:20_000]
        durations = [(f - q).total_seconds() for q, f in finished if f is not None]
        for q in (0.5, 0.99):
            push.add_metric([str(q)], _percentile(durations, q))
        yield push

        failures = GaugeMetricFamily(
            "controlplane_policy_sync_failures", "Policy syncs currently failed or drifted", labels=["state"]
        )
        counts = dict(
            PolicySync.objects.filter(state__in=["failed", "drifted"])
            .values_list("state")
            .annotate(n=Count("id"))
            .order_by()
        )
        for state in ("failed", "drifted"):
            failures.add_metric([state], counts.get(state, 0))
        yield failures

        last = GaugeMetricFamily(
            "controlplane_events_last_stored_timestamp_seconds", "When the newest event was stored"
        )
        newest = JobEvent.objects.aggregate(at=Max("stored_at"))["at"]
        last.add_metric([], newest.timestamp() if newest else 0)
        yield last


DATABASE_COLLECTOR = DatabaseCollector()
REGISTRY.register(DATABASE_COLLECTOR)
REGISTRY.register(SupervisedThreadsCollector())  # this process's supervised threads (issue #24)


def reset_cache() -> None:
    """Forget the cached database gauges (tests; the next scrape recomputes them)."""
    DATABASE_COLLECTOR.reset()


def metrics_view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics``: Prometheus text format, for the bearer of ``METRICS_TOKEN``.

    Only a ``DEBUG`` run without a token configured serves anyone: the gauges name clusters and
    reveal activity, and each uncached scrape reads the events table.
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

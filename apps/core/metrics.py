"""Every Prometheus metric of the control plane, by name, in one place (issue #27 item 1).

Latencies are ``_seconds`` histograms observed where the work happens; things that happen are
``_total`` counters; gauges hold only current state, set by the process that holds it. Nothing here
reads the database when scraped: a scrape renders what the process has counted (a test checks that it
issues no query). Each long-running process serves its own registry: the web process at ``/metrics``
(``apps/api/metrics.py``), the ingester, the decider and each Celery worker process on ``METRICS_PORT``
(``serve_metrics``). Prometheus sums across processes (``sum by (...) (rate(..._total[5m]))``).

The registry is prometheus_client's default one, so the request metrics of ``django-prometheus`` and the
process collector (CPU, memory, open files) are in the same scrape.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)

# From a hundredth of a second (a push or a decision on an idle system) to a minute (a storm): the
# goals (push p99 ≤ 2 s, decision p99 ≤ 1 s, ingest lag p99 ≤ 1 s) fall inside, with room either side.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
# Admission answers inside the API server's webhook timeout: a finer scale below a second.
ADMISSION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)

# --- latencies -------------------------------------------------------------------------------------
POLICY_PUSH_SECONDS = Histogram(
    "controlplane_policy_push_seconds",
    "Policy saved (sync queued) → patched into the cluster, per push that ended applied",
    buckets=LATENCY_BUCKETS,
)
ADMISSION_REVIEW_SECONDS = Histogram(
    "controlplane_admission_review_seconds",
    "Time to answer one AdmissionReview of an AscendJob, by result",
    ["result"],
    buckets=ADMISSION_BUCKETS,
)
DECISION_SECONDS = Histogram(
    "controlplane_decision_seconds",
    "ClusterD's question (ProcessConfirmFault seen) → answer written to the PodGroup, by who decided",
    ["decided_by"],
    buckets=LATENCY_BUCKETS,
)
INGEST_LAG_SECONDS = Histogram(
    "controlplane_ingest_lag_seconds",
    "Cluster event (its own timestamp) → stored by the ingester, by source",
    ["source"],
    buckets=LATENCY_BUCKETS,
)
INGEST_APPLY_SECONDS = Histogram(
    "controlplane_ingest_apply_seconds",
    "Wall time the ingester's applier spent storing one batch of due items (one transaction)",
    buckets=LATENCY_BUCKETS,
)
BROADCAST_LAG_SECONDS = Histogram(
    "controlplane_broadcast_lag_seconds",
    "Event stored → handed to the channel layer for the live stream",
    buckets=LATENCY_BUCKETS,
)

# --- things that happened --------------------------------------------------------------------------
FAULTS = Counter("controlplane_faults", "Faults stored (fault.* events), by source", ["source"])
INCIDENTS = Counter("controlplane_incidents", "Incidents closed, by outcome", ["outcome"])
POLICY_PUSHES = Counter("controlplane_policy_pushes", "Policy pushes finished, by result", ["result"])
WEBHOOK_DELIVERIES = Counter(
    "controlplane_webhook_deliveries", "Outbound webhook delivery attempts, by result", ["result"]
)
WATCH_RESTARTS = Counter(
    "controlplane_watch_restarts",
    "Watches of the cluster started again (410 expired → relist, or an error → backoff), by process",
    ["process", "resource", "reason"],
)
INGEST_ITEMS = Counter(
    "controlplane_ingest_items", "Items the ingester's applier stored (watch events, listed objects, signals)"
)
INGEST_EXPRESS = Counter(
    "controlplane_ingest_express",
    "Fault reports the ingester stored on arrival, ahead of the reorder hold (a job's first fault)",
)
INGEST_QUERIES = Counter(
    "controlplane_ingest_queries",
    "SQL statements the ingester's applier issued (storing items, lease checks, cursors; not COMMIT)",
)
DECISIONS = Counter("controlplane_decisions", "Platform-mode answers written, by who decided", ["decided_by"])
TOKEN_CACHE_LOOKUPS = Counter(
    "controlplane_token_cache_lookups",
    "API token lookups by where they were answered (apps/accounts/token_cache.py): hit = this process's "
    "copy, miss = the database (no copy, or the listening not proven), off = the copies not in use",
    ["result"],
)
TOKEN_CACHE_HITS = TOKEN_CACHE_LOOKUPS.labels(result="hit")  # every API request counts one: bound once
TOKEN_CACHE_MISSES = TOKEN_CACHE_LOOKUPS.labels(result="miss")
TOKEN_CACHE_OFF = TOKEN_CACHE_LOOKUPS.labels(result="off")
TOKEN_CACHE_NOTICES = Counter(
    "controlplane_token_cache_notices",
    "Changes to tokens, users or grants announced by the database; each drops this process's copies",
)

# --- current state ---------------------------------------------------------------------------------
PENDING_DECISIONS = Gauge(
    "controlplane_decisions_pending",
    "Questions from ClusterD waiting for a person's answer, as of the last decisions sweep",
)
LEASES_HELD = Gauge(
    "controlplane_leases_held",
    "Leases this process holds (apps/core/leases.py), by kind (ingest, decide) and cluster",
    ["lease", "cluster"],
)
LEASE_CLUSTERS = Gauge(
    "controlplane_lease_clusters",
    "Clusters this process competes for, by lease kind (each should have one holder among the processes)",
    ["lease"],
)
LEASE_MEMBERS = Gauge(
    "controlplane_lease_members",
    "Live processes competing for a kind's leases, as this process last counted them",
    ["lease"],
)
LEASE_LOSSES = Counter(
    "controlplane_lease_losses",
    "Leases found lost while held (their database session ended: a failover, a cut network)",
    ["lease", "cluster"],
)
ADMISSION_CERT_EXPIRY = "controlplane_admission_certificate_expiry_seconds"
# The supervised threads' state (apps/core/supervision.py publishes them from its own collector).
SUPERVISED_THREAD_UP = "controlplane_supervised_thread_up"
SUPERVISED_THREAD_RESTARTS = "controlplane_supervised_thread_restarts"
SUPERVISED_THREAD_FAILURES = "controlplane_supervised_thread_failures_in_a_row"


class CertificateExpiryCollector(Collector):
    """``controlplane_admission_certificate_expiry_seconds``: seconds until the notAfter of the serving
    certificate the admission server loaded last (``apps/admission/tls.py`` sets ``not_after`` from
    the very file it loaded, at each load); the subtraction is the only work of a scrape. A process
    that serves no webhook has no sample."""

    def __init__(self) -> None:
        self.not_after: float | None = None  # epoch seconds

    def describe(self) -> list[GaugeMetricFamily]:
        return [GaugeMetricFamily(ADMISSION_CERT_EXPIRY, "")]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            ADMISSION_CERT_EXPIRY,
            "Seconds until the admission webhook's serving certificate expires (negative: expired)",
        )
        if self.not_after is not None:
            family.add_metric([], self.not_after - time.time())
        yield family


ADMISSION_CERTIFICATE = CertificateExpiryCollector()
REGISTRY.register(ADMISSION_CERTIFICATE)


class QueueDepthCollector(Collector):
    """``controlplane_celery_queue_depth{queue}``: messages waiting in each Celery queue, read from the
    broker (one Redis ``LLEN`` per queue) when scraped; served by the worker's main process only.
    Not a database read; a broker that does not answer yields no sample rather than a stale one."""

    def __init__(self, connection_for_read: Callable[[], Any], queues: list[str]) -> None:
        self.connection_for_read = connection_for_read
        self.queues = queues

    def describe(self) -> list[GaugeMetricFamily]:
        return [GaugeMetricFamily("controlplane_celery_queue_depth", "", labels=["queue"])]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        depth = GaugeMetricFamily(
            "controlplane_celery_queue_depth", "Messages waiting in the Celery queue", labels=["queue"]
        )
        try:
            with self.connection_for_read() as conn:
                client = conn.default_channel.client  # kombu's Redis transport
                for queue in self.queues:
                    depth.add_metric([queue], float(client.llen(queue)))
        except Exception as exc:  # the broker is down: say so in the log, not as a number
            logger.warning("queue depth unavailable: %s", exc.__class__.__name__)
        yield depth


def decider_kind(decided_by: str) -> str:
    """``rule:3`` → ``rule``, ``user:alice`` → ``user``, ``default:deadline`` → ``default`` (bounded)."""
    return (decided_by or "none").split(":", 1)[0]


# --- serving ---------------------------------------------------------------------------------------
_served: dict[str, int] = {}
_serve_lock = threading.Lock()


def metrics_port(offset: int = 0) -> int | None:
    """``METRICS_PORT`` (+ ``offset``, for the n-th process of a pool), or None when unset or 0."""
    raw = os.environ.get("METRICS_PORT", "").strip()
    if not raw:
        return None
    try:
        base = int(raw)
    except ValueError:
        raise ValueError(f"METRICS_PORT must be a port number, not {raw!r}") from None
    if not 0 <= base <= 65535:
        raise ValueError(f"METRICS_PORT must be a port number 0-65535, not {base}")
    return base + offset if base else None


def serve_metrics(process: str, offset: int = 0) -> int | None:
    """Serve this process's metrics at ``http://METRICS_ADDR:METRICS_PORT+offset/metrics`` (a daemon
    thread); once per process. The port, or None when ``METRICS_PORT`` is unset."""
    port = metrics_port(offset)
    if port is None:
        return None
    with _serve_lock:
        if process in _served:
            return _served[process]
        addr = os.environ.get("METRICS_ADDR", "0.0.0.0")
        start_http_server(port, addr=addr, registry=REGISTRY)
        _served[process] = port
    logger.info("%s metrics on http://%s:%d/metrics", process, addr, port)
    return port

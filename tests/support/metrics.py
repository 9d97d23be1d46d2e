"""Reading a ``/metrics`` page the way Prometheus does (its client's own parser)."""

from __future__ import annotations

import urllib.request

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

# The latencies issue #27 names, each a histogram observed where the work happens.
HISTOGRAMS = (
    "controlplane_policy_push_seconds",
    "controlplane_admission_review_seconds",
    "controlplane_decision_seconds",
    "controlplane_ingest_lag_seconds",
    "controlplane_broadcast_lag_seconds",
)
# Counters, by family name (the parser drops the ``_total`` of their samples).
COUNTERS = (
    "controlplane_faults",
    "controlplane_incidents",
    "controlplane_policy_pushes",
    "controlplane_webhook_deliveries",
    "controlplane_watch_restarts",
    "controlplane_decisions",
)


def families(text: str) -> dict[str, Metric]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def scrape(port: int) -> dict[str, Metric]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return families(response.read().decode())


def assert_has_the_named_metrics(found: dict[str, Metric]) -> None:
    for name in HISTOGRAMS:
        assert name in found and found[name].type == "histogram", name
    for name in COUNTERS:
        assert name in found and found[name].type == "counter", name

"""deploy/monitoring/ (issue #27 item 2): the dashboard's and the alerts' queries name only metrics
the processes export, and the manifests are the Prometheus Operator kinds they claim to be."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client import REGISTRY

from apps.core import metrics

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
# Series Prometheus makes itself rather than scrapes.
BUILT_IN = {"up"}
# Words of PromQL that look like names: functions, aggregations, modifiers.
PROMQL = {
    "histogram_quantile", "sum", "max", "min", "avg", "count", "rate", "increase", "irate", "by",
    "without", "absent", "or", "and", "unless", "on", "ignoring", "le",
}  # fmt: skip
NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def exported_names() -> set[str]:
    """Every series name the control plane's processes can export (families and their samples)."""
    from django_prometheus.middleware import Metrics

    Metrics.get_instance()  # the web process's request metrics, created by its middleware

    names = set(BUILT_IN)
    families = [*REGISTRY.collect(), *metrics.QueueDepthCollector(lambda: None, []).describe()]
    for family in families:
        base = family.name
        names.add(base)
        if family.type == "counter":
            names |= {f"{base}_total", f"{base}_created"}
        if family.type == "histogram":
            names |= {f"{base}_bucket", f"{base}_sum", f"{base}_count", f"{base}_created"}
    return names


def names_in(expr: str) -> set[str]:
    without_labels = re.sub(r"\{[^}]*\}", "", expr)  # label matchers, {{legend}} and strings go
    without_strings = re.sub(r'"[^"]*"', "", without_labels)
    without_ranges = re.sub(r"\[[^\]]*\]", "", without_strings)
    found = set(NAME.findall(without_ranges)) - PROMQL
    grouped = {
        g for group in re.findall(r"by \(([^)]*)\)", without_ranges) for g in re.split(r"[,\s]+", group)
    }
    return {n for n in found - grouped if not n.isdigit()}


def dashboard_queries() -> list[str]:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    return [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]


def rule_queries() -> list[str]:
    rules = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    return [rule["expr"] for group in rules["spec"]["groups"] for rule in group["rules"]]


def test_every_dashboard_and_alert_query_names_an_exported_metric() -> None:
    exported = exported_names()
    queries = dashboard_queries() + rule_queries()
    assert len(queries) > 15
    unknown = {q: sorted(names_in(q) - exported) for q in queries if names_in(q) - exported}
    assert unknown == {}
    for query in queries:
        assert names_in(query), query  # each names at least one metric


def test_the_dashboard_shows_every_latency_histogram() -> None:
    from tests.support.metrics import HISTOGRAMS

    shown = {n for q in dashboard_queries() for n in names_in(q)}
    assert {f"{h}_bucket" for h in HISTOGRAMS} <= shown


def test_the_manifests_are_prometheus_operator_kinds() -> None:
    kinds = {}
    for path in sorted(MONITORING.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            assert doc["apiVersion"] == "monitoring.coreos.com/v1", path
            assert doc["metadata"]["namespace"] == "mindcluster-recovery"
            kinds[doc["kind"]] = doc
    assert set(kinds) == {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
    for rule in kinds["PrometheusRule"]["spec"]["groups"][0]["rules"]:
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]

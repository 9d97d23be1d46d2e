"""``/metrics`` of the web process (issue #27 item 1): Prometheus's parser reads it, the latencies are
histograms and the totals counters, request metrics come from django-prometheus, and a scrape issues
no database query (it renders what the process counted)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client, override_settings

from tests.support.metrics import assert_has_the_named_metrics, families

pytestmark = pytest.mark.django_db

AUTH = {"HTTP_AUTHORIZATION": "Bearer t"}


def sample(found: dict[str, Any], family: str, name: str, **labels: str) -> float:
    for s in found[family].samples:
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            return float(s.value)
    return 0.0


@override_settings(DEBUG=False, METRICS_TOKEN="t")
def test_the_web_process_serves_the_named_histograms_and_counters() -> None:
    response = Client().get("/metrics", **AUTH)
    assert response.status_code == 200
    found = families(response.content.decode())
    assert_has_the_named_metrics(found)
    # Request latency from django-prometheus (by view and method), a histogram too.
    assert found["django_http_requests_latency_seconds_by_view_method"].type == "histogram"
    # No gauge with a quantile label any more (those were database scans per scrape).
    assert not [
        f.name for f in found.values() for s in f.samples if f.type == "gauge" and "quantile" in s.labels
    ]


@override_settings(DEBUG=False, METRICS_TOKEN="t")
def test_a_scrape_issues_no_database_query(django_assert_num_queries: Any) -> None:
    Client().get("/metrics", **AUTH)  # the first one too: nothing is computed lazily from tables
    with django_assert_num_queries(0):
        response = Client().get("/metrics", **AUTH)
    assert response.status_code == 200


@override_settings(DEBUG=False, METRICS_TOKEN="t")
@pytest.mark.urls("controlplane.admission_urls")  # the webhook's routes exist only in its own process
def test_the_admission_histogram_is_observed_by_the_review_itself() -> None:
    family, bucket = "controlplane_admission_review_seconds", "controlplane_admission_review_seconds_count"
    before = sample(
        families(Client().get("/metrics", **AUTH).content.decode()), family, bucket, result="rejected"
    )
    response = Client().post("/admission/ascendjobs/", data=b"not json", content_type="application/json")
    assert response.status_code == 400
    after = sample(
        families(Client().get("/metrics", **AUTH).content.decode()), family, bucket, result="rejected"
    )
    assert after == before + 1

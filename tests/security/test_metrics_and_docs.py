"""Issue #16 item 7: ``/metrics`` needs its token whenever ``DEBUG`` is false and a scrape is cheap;
``/api/schema/`` and ``/api/docs/`` are for signed-in users unless ``API_DOCS_PUBLIC=true`` (issue #24),
and the schema is generated once per process."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db


@override_settings(DEBUG=False, METRICS_TOKEN="")
def test_without_a_token_configured_production_metrics_are_refused() -> None:
    response = Client().get("/metrics")
    assert response.status_code == 403
    assert b"METRICS_TOKEN" in response.content


@override_settings(DEBUG=False, METRICS_TOKEN="s3cret-scrape-token")
def test_with_a_token_only_its_bearer_may_scrape() -> None:
    assert Client().get("/metrics").status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    ok = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scrape-token")
    assert ok.status_code == 200 and b"controlplane_policy_push_seconds_bucket" in ok.content


@override_settings(DEBUG=True, METRICS_TOKEN="")
def test_a_debug_run_serves_metrics_without_a_token() -> None:
    assert Client().get("/metrics").status_code == 200


@override_settings(DEBUG=False, METRICS_TOKEN="t")
def test_scrapes_run_no_queries(django_assert_num_queries: Any) -> None:
    # Issue #16 cached the database gauges; issue #27 removed them: no scrape reads the database.
    auth = {"HTTP_AUTHORIZATION": "Bearer t"}
    with django_assert_num_queries(0):
        first = Client().get("/metrics", **auth)
        again = Client().get("/metrics", **auth)
    assert first.status_code == again.status_code == 200
    assert b"controlplane_policy_push_seconds_bucket" in again.content


def test_the_api_schema_and_docs_require_sign_in_by_default(django_user_model: Any) -> None:
    """Issue #24 (low): in a multi-tenant control plane the API's map is for its users."""
    assert Client().get("/api/schema/").status_code in (401, 403)
    assert Client().get("/api/docs/").status_code in (302, 401, 403)
    user = django_user_model.objects.create_user("reader", password="pw")
    client = Client()
    client.force_login(user)
    assert client.get("/api/schema/").status_code == 200
    assert client.get("/api/docs/").status_code == 200


@override_settings(API_DOCS_PUBLIC=True)
def test_the_api_schema_and_docs_can_be_public() -> None:
    assert Client().get("/api/schema/").status_code == 200
    assert Client().get("/api/docs/").status_code == 200


@override_settings(API_DOCS_PUBLIC=True)
def test_the_schema_is_generated_once_per_process_not_per_request() -> None:
    """Issue #24 (low): each request regenerated the whole schema (~a second of CPU per request).
    Counted, not timed: the generator runs at most once (a CPU-time bound failed on a loaded machine
    once the schema grew, while nothing was regenerated)."""
    from unittest import mock

    from drf_spectacular.generators import SchemaGenerator

    Client().get("/api/schema/")  # generated (or already cached by an earlier test)
    with mock.patch.object(SchemaGenerator, "get_schema", autospec=True) as generate:
        for _ in range(5):
            again = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
            assert again.status_code == 200 and again.json()["openapi"].startswith("3")
    assert generate.call_count == 0

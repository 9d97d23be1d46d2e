"""``GET /api/v1/fleet/``: who sees what, and every bad parameter a 400 naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from apps.accounts.models import Role
from tests.support.fleet import Fleet, small_fleet
from tests.support.world import grant, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(db: Any, tmp_path: Path) -> Fleet:
    return small_fleet(tmp_path)


def client_for(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_viewer_of_one_namespace_counts_only_its_jobs(fleet: Fleet) -> None:
    viewer = make_user("viewer")
    grant(Role.VIEWER, user=viewer, cluster=fleet.west, namespace="team-b")
    body = client_for(viewer).get("/api/v1/fleet/").json()
    assert [c["cluster"] for c in body["clusters"]] == ["west"]
    assert body["total"]["faults"]["total"] == 1
    assert [j["name"] for j in body["top_jobs"]] == ["bert"]
    # A cluster it holds no role in is not even named.
    response = client_for(viewer).get("/api/v1/fleet/?cluster=east")
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert (error["field"], error["allowed"]) == ("cluster", ["west"])


def test_a_user_without_grants_sees_an_empty_fleet(fleet: Fleet) -> None:
    body = client_for(make_user("nobody")).get("/api/v1/fleet/").json()
    assert body["total"]["faults"]["total"] == 0
    assert body["clusters"] == body["namespaces"] == body["top_jobs"] == []


def test_filters_by_cluster_and_namespace(fleet: Fleet) -> None:
    admin = User.objects.create_superuser("root", password="pw")
    body = client_for(admin).get("/api/v1/fleet/?cluster=east&namespace=team-a&window_days=2").json()
    assert body["filters"] == {"cluster": "east", "namespace": "team-a"}
    assert body["total"]["faults"]["total"] == 3
    assert body["total"]["jobs_url"] == "/?cluster=east&namespace=team-a"
    assert len(body["total"]["faults"]["buckets"]) == 2
    by_id = client_for(admin).get(f"/api/v1/fleet/?cluster={fleet.west.pk}").json()
    assert by_id["total"]["faults"]["total"] == 1


@pytest.mark.parametrize(
    ("query", "field", "allowed"),
    [
        ("window_days=0", "window_days", [1, 365]),
        ("window_days=366", "window_days", [1, 365]),
        ("window_days=seven", "window_days", [1, 365]),
        ("window_days=%EF%BC%97", "window_days", [1, 365]),  # a full-width 7: digits are ASCII only
        ("checkpoint_period_s=1", "checkpoint_period_s", [60, 604800]),
        ("namespace=Team_A", "namespace", None),
        ("cluster=nowhere", "cluster", ["east", "west"]),
        ("windows=7", "windows", ["window_days", "cluster", "namespace", "checkpoint_period_s"]),
    ],
)
def test_bad_parameters_are_400_naming_the_field(
    fleet: Fleet, query: str, field: str, allowed: list | None
) -> None:
    admin = User.objects.create_superuser("root", password="pw")
    response = client_for(admin).get(f"/api/v1/fleet/?{query}")
    assert response.status_code == 400, response.content
    error = response.json()["errors"][0]
    assert error["field"] == field
    if allowed is not None:
        assert error["allowed"] == allowed


def test_anonymous_is_refused(fleet: Fleet) -> None:
    assert APIClient().get("/api/v1/fleet/").status_code in (401, 403)


def test_reads_summaries_only_in_a_few_queries(fleet: Fleet) -> None:
    viewer = make_user("viewer")
    grant(Role.VIEWER, user=viewer, cluster=fleet.east, namespace="*")
    client = client_for(viewer)
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/v1/fleet/?window_days=90").status_code == 200
    tables = " ".join(q["sql"] for q in queries.captured_queries)
    assert "events_jobevent" not in tables and "events_incident" not in tables
    # A fixed number, whatever the fleet's size: the grants, the cluster names, the sums (numbers,
    # four JSON maps, the faults per day, the percentiles), the top jobs and their rows; and the
    # transaction that turns JIT off (a savepoint here, inside the test's transaction).
    assert len(queries.captured_queries) <= 15, [q["sql"][:80] for q in queries.captured_queries]

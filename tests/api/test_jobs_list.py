"""``GET /api/v1/jobs/`` at fleet size (issue #26): sorted, filtered and paged by the server, the total
counted, a 400 naming the parameter and listing its values for anything else, and a page that costs
the same number of queries for 4 jobs as for 60, whatever the sort and the filter.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.accounts.models import Role
from apps.api.jobs.ordering import ORDERING_CHOICES, SORT_KEYS
from apps.events.models import Incident
from apps.jobs.models import Cluster, TrainingJob
from tests.support.jobs_list import add_jobs
from tests.support.world import World, grant

pytestmark = pytest.mark.django_db

FILTERS = [
    "cluster=sim",
    "namespace=team-a",
    "phase=Running",
    "strategy=recover",
    "strategy=none",
    "in_effect=unknown",
    "recovering=true",
    "recovering=false",
    "could_save_min=1",
    "q=job",
]


def every_row(client: Any, query: str, limit: int = 7) -> tuple[int, list[dict[str, Any]]]:
    rows: list[dict[str, Any]] = []
    offset, count = 0, -1
    while True:
        body = client.get(f"/api/v1/jobs/?{query}&limit={limit}&offset={offset}").json()
        count = body["count"]
        rows += body["results"]
        offset += limit
        if body["next"] is None:
            return count, rows


def test_every_sort_pages_through_all_jobs_in_order(world: World) -> None:
    add_jobs(world, 20)
    client = world.client("owner")
    for ordering in ORDERING_CHOICES:
        check_sorted(client, ordering)


def check_sorted(client: Any, ordering: str) -> None:
    count, rows = every_row(client, f"ordering={ordering}")
    assert count == len(rows) == 21  # the 20 and llama: the owner may not see secret (team-b)
    assert len({row["id"] for row in rows}) == len(rows)  # no page repeats a row
    key = ordering.lstrip("-")
    field = {
        "strategy": "strategies",
        "last_fault": "last_fault_at",
        "created": "created_at",
        "cluster": "cluster_id",  # grouped by cluster id (apps/api/jobs/ordering.py)
        "in_effect": "in_effect_state",
    }.get(key, key)
    values = [row[field] for row in rows]
    present = [v for v in values if v is not None]
    # Empty figures last in both directions; the rest in the order asked for.
    assert values == present + [None] * (len(values) - len(present))
    assert present == sorted(present, reverse=ordering.startswith("-"))


def test_sorts_are_the_documented_ones() -> None:
    assert set(SORT_KEYS) >= {
        "name",
        "namespace",
        "cluster",
        "phase",
        "strategy",
        "in_effect",
        "last_fault",
        "could_save",
    }


def test_filters_select_the_matching_jobs_and_count_them(world: World) -> None:
    jobs = add_jobs(world, 12)
    client = world.client("owner")
    for query in FILTERS:
        check_filtered(client, query, jobs)


def check_filtered(client: Any, query: str, jobs: list[TrainingJob]) -> None:
    count, rows = every_row(client, query)
    assert count == len(rows)
    name, value = query.split("=")
    for row in rows:
        if name == "strategy":
            assert (value in row["strategies"]) if value != "none" else row["strategies"] == []
        elif name == "in_effect":
            assert row["in_effect_state"] == value
        elif name == "could_save_min":
            assert row["could_save"] is not None and row["could_save"] >= 1
        elif name == "recovering":
            is_open = Incident.objects.filter(job_id=row["id"], closed_at__isnull=True).exists()
            assert is_open == (value == "true")
        elif name in ("namespace", "phase", "cluster"):
            assert row[name] == value
    if query == "strategy=recover":
        assert {row["name"] for row in rows} == {j.name for j in jobs if int(j.name[-3:]) % 4 == 1} | {
            "llama"
        }


@pytest.mark.parametrize(
    ("query", "field", "allowed"),
    [
        ("ordering=size", "ordering", list(ORDERING_CHOICES)),
        ("ordering=--name", "ordering", list(ORDERING_CHOICES)),
        ("strategy=reboot", "strategy", None),
        ("in_effect=maybe", "in_effect", ["in-effect", "waiting", "unknown"]),
        ("limit=0", "limit", [1, 500]),
        ("offset=-3", "offset", None),
        ("could_save_min=lots", "could_save_min", None),
        ("recovering=perhaps", "recovering", None),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(world: World, query: str, field: str, allowed: Any) -> None:
    response = world.client("owner").get(f"/api/v1/jobs/?{query}")
    assert response.status_code == 400, response.content
    error = response.json()["errors"][0]
    assert error["field"] == field
    if allowed is not None:
        assert error["allowed"] == allowed
    if field == "strategy":
        assert "recover-in-place" in error["allowed"] and "none" in error["allowed"]


def page_queries(client: Any, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, response.content
    return len(queries)


def test_a_page_costs_the_same_queries_for_4_jobs_as_for_60(world: World) -> None:
    # A group grant plus a direct one: the visibility filter at its most complex.
    grant(Role.VIEWER, user=world.users["admin"], cluster=world.cluster, namespace="team-c")
    client = world.client("admin")
    client.get("/api/v1/tokens/")  # last_used_at written once, not during the measured requests
    queries = [f"ordering={o}" for o in ORDERING_CHOICES] + FILTERS
    add_jobs(world, 4)  # each filter matches one of these at least: no page is empty
    small = {query: page_queries(client, f"/api/v1/jobs/?{query}&limit=50") for query in queries}
    add_jobs(world, 56, start=4)
    Cluster.objects.create(name="other")
    for query in queries:
        # token, grants, count, the page's ids, its rows
        large = page_queries(client, f"/api/v1/jobs/?{query}&limit=50&offset=1")
        assert large == small[query] <= 5, (query, small[query], large)

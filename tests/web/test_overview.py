"""The jobs overview at any size (issue #26): one page rendered and fetched at a time with the list
API's parameters and errors, the total, one row re-read for a live update, a bounded query count."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from apps.jobs.models import TrainingJob
from tests.support.world import World, training_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser_client(world: World) -> Client:
    client = Client()
    client.force_login(world.users["owner"])
    return client


def add_jobs(world: World, n: int, start: int = 0) -> None:
    TrainingJob.objects.bulk_create(
        [
            TrainingJob(cluster=world.cluster, namespace="team-a", name=f"job-{i:04d}", phase="Running")
            for i in range(start, start + n)
        ]
    )


def bootstrap_of(html: str) -> dict[str, Any]:
    match = re.search(r'<script id="bootstrap" type="application/json">(.*?)</script>', html, re.S)
    assert match, "the page has no bootstrap JSON"
    return dict(json.loads(match.group(1)))


def test_the_page_renders_one_page_and_the_total(world: World, browser_client: Client) -> None:
    add_jobs(world, 120)
    html = browser_client.get("/?ordering=-name&limit=25&offset=25").content.decode()
    page = bootstrap_of(html)["page"]
    assert page["count"] == 121 and page["offset"] == 25 and page["limit"] == 25
    # Descending by name: llama, job-0119 … job-0096 fill the first page.
    assert [row["name"] for row in page["results"]][:2] == ["job-0095", "job-0094"]
    assert len(page["results"]) == 25
    choices = bootstrap_of(html)["choices"]
    assert choices["namespace"] == ["team-a"] and "recover" in choices["strategy"]


def test_pages_filters_and_one_row(world: World, browser_client: Client) -> None:
    add_jobs(world, 30)
    body = browser_client.get("/ui/jobs.json?q=job-001&ordering=name").json()
    assert body["count"] == 10 and body["results"][0]["name"] == "job-0010"
    row = browser_client.get(f"/ui/jobs/{world.job.pk}.json").json()
    assert row["name"] == "llama" and row["strategies"] and "in_effect" in row
    assert browser_client.get(f"/ui/jobs/{world.other_job.pk}.json").status_code == 404  # team-b


def test_a_bad_parameter_is_the_apis_400(world: World, browser_client: Client) -> None:
    response = browser_client.get("/ui/jobs.json?ordering=size")
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["field"] == "ordering" and "-could_save" in error["allowed"]
    page = browser_client.get("/?in_effect=maybe")
    assert page.status_code == 200  # the page still opens, with the error shown and no rows
    assert bootstrap_of(page.content.decode())["error"]["errors"][0]["field"] == "in_effect"


def test_a_page_costs_the_same_queries_for_3_jobs_as_for_300(world: World, browser_client: Client) -> None:
    User.objects.filter(pk=world.users["owner"].pk).update(last_login=None)
    add_jobs(world, 2)
    with CaptureQueriesContext(connection) as small:
        assert browser_client.get("/ui/jobs.json?limit=50&ordering=-last_fault").status_code == 200
    add_jobs(world, 297, start=2)
    for i in range(3):
        training_job(world.cluster, f"other-{i}", namespace=f"ns-{i}")
    with CaptureQueriesContext(connection) as large:
        assert browser_client.get("/ui/jobs.json?limit=50&offset=100&ordering=-last_fault").status_code == 200
    assert len(large) == len(small), [q["sql"][:80] for q in large]
    with CaptureQueriesContext(connection) as page:
        assert browser_client.get("/?limit=200").status_code == 200
    # + the filter choices (3 when not cached), their cache key (the grants, the newest job) and the user
    assert len(page) <= len(large) + 8, [q["sql"][:80] for q in page]


def test_the_filter_choices_are_kept_until_the_grants_or_the_jobs_change(
    world: World, browser_client: Client
) -> None:
    """The distinct namespaces and phases (a walk over every visible job) are read once, then kept."""
    from apps.accounts.models import NamespaceGrant, Role
    from apps.jobs.models import Cluster

    browser_client.get("/")  # read and kept
    with CaptureQueriesContext(connection) as again:
        html = browser_client.get("/").content.decode()
    assert not [q for q in again if "DISTINCT" in q["sql"]], [q["sql"][:80] for q in again]
    assert bootstrap_of(html)["choices"]["namespace"] == ["team-a"]
    # A newly adopted job (here in a phase no other job is in): the choices are read again.
    fresh = training_job(world.cluster, "fresh", namespace="team-a")
    TrainingJob.objects.filter(pk=fresh.pk).update(phase="Suspended")
    choices = bootstrap_of(browser_client.get("/").content.decode())["choices"]
    assert "Suspended" in choices["phase"]
    # A new grant (another cluster) shows at once too.
    other = Cluster.objects.create(name="zeta", kubeconfig_path="/nonexistent")
    NamespaceGrant.objects.create(role=Role.VIEWER, user=world.users["owner"], cluster=other, namespace="*")
    assert "zeta" in bootstrap_of(browser_client.get("/").content.decode())["choices"]["cluster"]

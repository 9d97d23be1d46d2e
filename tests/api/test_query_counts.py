"""Every list costs a constant number of SQL queries, whatever the page size (1 item vs 50)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from apps.accounts.models import NamespaceGrant, Role
from apps.accounts.services import token_issue
from apps.audit.actors import Actor
from apps.audit.services import audit_record
from apps.events.services import event_record
from apps.jobs.models import Cluster
from apps.policies.models import Preset
from apps.policies.services import policy_revision_create
from tests.support.world import World, training_job

pytestmark = pytest.mark.django_db


_serial = itertools.count()


def add_jobs(world: World, n: int) -> None:
    for _ in range(n):
        training_job(world.cluster, f"job-{next(_serial)}")


def add_clusters(world: World, n: int) -> None:
    for _ in range(n):
        cluster = Cluster.objects.create(name=f"c-{next(_serial)}")
        NamespaceGrant.objects.create(role=Role.VIEWER, user=world.users["admin"], cluster=cluster)


def add_revisions(world: World, n: int) -> None:
    for i in range(n):
        policy_revision_create(
            job=world.job, spec={"strategies": ["dump"], "ttp_port": 9000 + i}, actor=Actor(name="t")
        )


def add_events(world: World, n: int) -> None:
    for i in range(n):
        event_record(job=world.job, kind="fault.detected", message=f"e{i}", source="t")


def add_presets(world: World, n: int) -> None:
    for i in range(n):
        Preset.objects.create(
            name=f"p-{Preset.objects.count()}-{i}", spec={}, created_by=world.users["owner"]
        )


def add_audit(world: World, n: int) -> None:
    for _ in range(n):
        audit_record(actor=Actor(user=world.users["owner"]), action="job.touch", obj=world.job)


def add_tokens(world: World, n: int) -> None:
    with override_settings(API_TOKENS_PER_USER=1_000):  # more than the per-user cap (issue #16)
        for i in range(n):
            token_issue(world.users["admin"], f"t{i}")


LISTS: list[tuple[str, Callable[[World], str], Callable[[World, int], None]]] = [
    ("jobs", lambda w: "/api/v1/jobs/", add_jobs),
    ("clusters", lambda w: "/api/v1/clusters/", add_clusters),
    ("revisions", lambda w: f"/api/v1/jobs/{w.job.pk}/policy/revisions/", add_revisions),
    ("job events", lambda w: f"/api/v1/jobs/{w.job.pk}/events/", add_events),
    ("events", lambda w: "/api/v1/events/", add_events),
    ("presets", lambda w: "/api/v1/presets/", add_presets),
    ("audit", lambda w: "/api/v1/audit/", add_audit),
    ("tokens", lambda w: "/api/v1/tokens/", add_tokens),
]


def count_queries(client: Any, url: str) -> tuple[int, int]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, {"limit": 100})
    assert response.status_code == 200
    return len(queries), len(response.json()["results"])


@pytest.mark.parametrize(("name", "url", "grow"), LISTS, ids=[item[0] for item in LISTS])
def test_list_query_count_is_constant(
    world: World, name: str, url: Callable[[World], str], grow: Callable[[World, int], None]
) -> None:
    client = world.client("admin")  # a group grant: the visibility filter is at its most complex
    client.get("/api/v1/tokens/")  # warm up: records last_used_at once, so later requests write nothing
    grow(world, 1)
    small, small_rows = count_queries(client, url(world))
    grow(world, 49)
    large, large_rows = count_queries(client, url(world))
    assert large_rows >= small_rows + 49, (name, small_rows, large_rows)
    assert large == small, f"{name}: {small} queries for {small_rows} rows but {large} for {large_rows}"

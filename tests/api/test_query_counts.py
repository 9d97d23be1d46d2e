"""Every list costs a constant number of SQL queries, whatever the page size (1 item vs 50)."""

from __future__ import annotations

import itertools
import uuid
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
from apps.events.models import Webhook, WebhookDelivery
from apps.events.services import event_record
from apps.jobs.incarnations import incarnation_observe_podgroup
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.models import Preset
from apps.policies.services import policy_revision_create
from mindcluster import keys as c
from tests.support.in_effect import forget_in_effect
from tests.support.world import World, operator_podgroup, training_job

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


def _team_webhook(world: World) -> Webhook:
    """A webhook for the admin persona's namespace (team-a of cluster sim)."""
    return Webhook.objects.get_or_create(
        name="team-a", cluster=world.cluster, namespace=world.job.namespace, defaults={"secret": "k" * 16}
    )[0]


def add_webhooks(world: World, n: int) -> None:
    for _ in range(n):
        Webhook.objects.create(
            name=f"w-{next(_serial)}", cluster=world.cluster, namespace=world.job.namespace, secret="k" * 16
        )


def add_deliveries(world: World, n: int) -> None:
    hook = _team_webhook(world)
    for _ in range(n):
        WebhookDelivery.objects.create(
            webhook=hook, delivery_id=uuid.uuid4(), kind="incident.opened", payload={}
        )


LISTS: list[tuple[str, Callable[[World], str], Callable[[World, int], None]]] = [
    ("jobs", lambda w: "/api/v1/jobs/", add_jobs),
    ("clusters", lambda w: "/api/v1/clusters/", add_clusters),
    ("revisions", lambda w: f"/api/v1/jobs/{w.job.pk}/policy/revisions/", add_revisions),
    ("job events", lambda w: f"/api/v1/jobs/{w.job.pk}/events/", add_events),
    ("events", lambda w: "/api/v1/events/", add_events),
    ("presets", lambda w: "/api/v1/presets/", add_presets),
    ("audit", lambda w: "/api/v1/audit/", add_audit),
    ("tokens", lambda w: "/api/v1/tokens/", add_tokens),
    ("webhooks", lambda w: "/api/v1/webhooks/", add_webhooks),
    ("webhook deliveries", lambda w: f"/api/v1/webhooks/{_team_webhook(w).pk}/deliveries/", add_deliveries),
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


def _observed(world: World) -> TrainingJob:
    """The world's job as the ingester leaves it: its PodGroup seen, created with revision 1."""
    job = world.job
    job.uid = str(uuid.uuid4())
    job.save(update_fields=["uid"])
    annotations = {c.ANNOTATION_RECOVER_STRATEGY: "retry,recover,dump", c.ANNOTATION_POLICY_REVISION: "1"}
    incarnation_observe_podgroup(
        job, operator_podgroup(job, {"fault-scheduling": "grace"}, annotations), "ingester"
    )
    return job


# What each hot read costs (bench/profile_api.py prints the statements). Job detail, served from the
# in-effect cache: the token with its user's grants, and the job with its cluster, its revision and
# the in-effect fingerprint (2). On a miss add the incarnations and the revisions (the written pushes
# too when a revision waits), and, inside a transaction as in these tests, the fingerprint again
# before storing (5). The policy GET's latest push comes with the job (written by PostgreSQL as its
# JSON, apps/api/policies/bodies.py), so it costs what the detail does. A page of the list is the
# token with the grants, and its rows as JSON with the list's count (the page's ids and the count
# subqueries of that statement: apps/api/jobs/list_rows.py), whatever its size (above).
HOT_READS = [
    ("detail", lambda job: f"/api/v1/jobs/{job.pk}/", 5, 2),
    ("policy", lambda job: f"/api/v1/jobs/{job.pk}/policy/", 5, 2),
    ("list", lambda job: "/api/v1/jobs/", 2, 2),
]


@pytest.mark.parametrize(("name", "url", "cold", "warm"), HOT_READS, ids=[item[0] for item in HOT_READS])
def test_hot_reads_cost_a_pinned_number_of_queries(
    world: World, name: str, url: Callable[[TrainingJob], str], cold: int, warm: int
) -> None:
    job = _observed(world)
    forget_in_effect(job.pk)
    client = world.client("teammate")
    client.get("/api/v1/tokens/")  # last_used_at recorded once, so the reads below write nothing
    with CaptureQueriesContext(connection) as first:
        assert client.get(url(job)).status_code == 200
    with CaptureQueriesContext(connection) as second:
        assert client.get(url(job)).status_code == 200
    statements = [[q["sql"][:100] for q in run.captured_queries] for run in (first, second)]
    assert (len(first), len(second)) == (cold, warm), statements

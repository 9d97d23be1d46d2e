"""The jobs list's total comes from live-job counts that PostgreSQL keeps per (cluster, namespace)
(apps/jobs/models.py ``LiveJobCount``, triggers in migration jobs 0004): after any mix of writes,
in any statement shape, the counts equal counting the live jobs, and the list's total equals
``COUNT(*)`` for every user."""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest
from django.db import connection, connections, transaction
from django.db.models import Count
from django.utils import timezone

from apps.jobs.models import Cluster, LiveJobCount, TrainingJob
from tests.support.world import World, training_job

pytestmark = pytest.mark.django_db


def counted() -> Counter[tuple[int, str]]:
    live = TrainingJob.objects.filter(deleted_at__isnull=True).values("cluster_id", "namespace")
    rows = live.annotate(n=Count("id")).values_list("cluster_id", "namespace", "n")
    return Counter({(cluster_id, namespace): n for cluster_id, namespace, n in rows})


def kept() -> Counter[tuple[int, str]]:
    return Counter(
        {(row.cluster_id, row.namespace): row.live for row in LiveJobCount.objects.all() if row.live}
    )


def test_counts_follow_every_kind_of_write(world: World) -> None:
    other = Cluster.objects.create(name="second")
    clusters = [world.cluster, other]
    namespaces = ["team-a", "team-b", "team-c"]
    rng = random.Random(26)
    serial = 0
    for step in range(60):
        jobs = list(TrainingJob.objects.all())
        action = rng.choice(["create", "bulk", "soft", "undelete", "move", "mass", "delete", "edit"])
        if action == "create" or not jobs:
            serial += 1
            training_job(rng.choice(clusters), f"j{serial}", namespace=rng.choice(namespaces))
        elif action == "bulk":
            made = []
            for _ in range(rng.randint(1, 5)):
                serial += 1
                made.append(
                    TrainingJob(
                        cluster=rng.choice(clusters),
                        namespace=rng.choice(namespaces),
                        name=f"j{serial}",
                        deleted_at=timezone.now() if rng.random() < 0.3 else None,
                    )
                )
            TrainingJob.objects.bulk_create(made)
        elif action == "soft":
            TrainingJob.objects.filter(pk=rng.choice(jobs).pk).update(deleted_at=timezone.now())
        elif action == "undelete":
            TrainingJob.objects.filter(pk=rng.choice(jobs).pk).update(deleted_at=None)
        elif action == "move":  # namespace and cluster of one job (an update of the counted keys)
            TrainingJob.objects.filter(pk=rng.choice(jobs).pk).update(
                namespace=rng.choice(namespaces), cluster=rng.choice(clusters)
            )
        elif action == "mass":  # one statement over several namespaces, both ways
            TrainingJob.objects.filter(namespace=rng.choice(namespaces)).update(
                deleted_at=timezone.now() if rng.random() < 0.5 else None
            )
        elif action == "delete":  # of jobs made here (the world's have policy history, protected)
            mine = [j.pk for j in jobs if j.name.startswith("j")]
            TrainingJob.objects.filter(pk__in=rng.sample(mine, min(3, len(mine)))).delete()
        else:  # a write that changes neither liveness nor place writes no count
            before = list(LiveJobCount.objects.order_by("pk").values_list("pk", "live"))
            TrainingJob.objects.filter(pk=rng.choice(jobs).pk).update(phase="Running", could_save=1.5)
            assert list(LiveJobCount.objects.order_by("pk").values_list("pk", "live")) == before
        assert kept() == counted(), (step, action)
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # Django's deferred foreign keys checked first
        cursor.execute("TRUNCATE jobs_trainingjob CASCADE")
    assert kept() == Counter() == counted()


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_in_one_namespace_keep_the_count(world: World) -> None:
    """Two transactions adding jobs to the same namespace at once: the count row is locked by the
    first and updated again by the second, not overwritten."""
    start = threading.Barrier(4)

    def add(prefix: str) -> None:
        try:
            start.wait()
            for i in range(10):
                with transaction.atomic():
                    training_job(world.cluster, f"{prefix}-{i}", namespace="busy")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=add, args=(f"w{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert kept()[(world.cluster.pk, "busy")] == 40 == counted()[(world.cluster.pk, "busy")]


def test_the_backfill_counts_what_was_there(world: World) -> None:
    """Migration 0004 on a database that already has jobs: the counts it starts from are exact."""
    from importlib import import_module

    migration = import_module("apps.jobs.migrations.0004_live_job_count")
    with connection.cursor() as cursor:
        for statement in migration.DROP:
            cursor.execute(statement)
        for i in range(7):
            training_job(world.cluster, f"before-{i}", namespace=("team-a", "team-z")[i % 2])
        TrainingJob.objects.filter(name="before-0").update(deleted_at=timezone.now())
        assert kept() != counted()  # written while nothing kept the counts
        for statement in migration.CREATE:
            cursor.execute(statement)
    assert kept() == counted()
    training_job(world.cluster, "after", namespace="team-z")
    assert kept() == counted()


def test_the_list_total_equals_counting_for_every_user(world: World) -> None:
    for i in range(9):
        training_job(world.cluster, f"t{i}", namespace=("team-a", "team-b", "team-c")[i % 3])
    TrainingJob.objects.filter(name="t0").update(deleted_at=timezone.now())
    for user in world.users:
        client = world.client(user)
        body = client.get("/api/v1/jobs/?limit=2").json()
        expected = client.get("/api/v1/jobs/?limit=2&include_deleted=false").json()["count"]
        assert body["count"] == expected, user


def test_users_alike_share_the_list_s_compiled_queries_and_a_grant_change_is_a_new_one(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unfiltered list's queries are built once per (order, visibility) in a process
    (apps/api/jobs/list_rows.py ``unfiltered_json_page``): a user with the same grants as another
    reuses them; a grant added changes the user's visibility, so the next page is built again and
    shows the namespace it opened."""
    from apps.accounts import selectors
    from apps.accounts.models import Role
    from apps.accounts.services import token_issue
    from apps.api.jobs import list_rows
    from tests.support.world import grant, make_user

    for i in range(4):
        training_job(world.cluster, f"v{i}", namespace=("team-a", "team-c")[i % 2])
    built: list[object] = []
    real = selectors.live_job_counts_visible_to

    def counted_builds(user: object) -> object:
        built.append(user)
        return real(user)  # type: ignore[arg-type]

    monkeypatch.setattr("apps.api.jobs.views.live_job_counts_visible_to", counted_builds)
    list_rows._PAGE._kept.clear()
    twins = [make_user(f"twin-{n}") for n in range(2)]
    for twin in twins:
        grant(Role.VIEWER, user=twin, cluster=world.cluster, namespace="team-a")
    keys = [token_issue(twin, "ci")[1] for twin in twins]

    def names(key: str) -> list[str]:
        client = world.client(None)
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        body = client.get("/api/v1/jobs/?limit=50&ordering=name").json()
        assert body["count"] == len(body["results"])
        return [row["name"] for row in body["results"]]

    assert names(keys[0]) == names(keys[1]) == ["llama", "v0", "v2"]
    assert built == [twins[0]]  # the second twin's page used the first one's queries
    grant(Role.VIEWER, user=twins[1], cluster=world.cluster, namespace="team-c")
    assert names(keys[1]) == ["llama", "v0", "v1", "v2", "v3"]
    assert names(keys[0]) == ["llama", "v0", "v2"]
    assert len(built) == 2

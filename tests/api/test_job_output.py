"""The jobs list and detail render rows by hand (``job_row_output``) for speed: they must say exactly
what ``JobOutputSerializer`` (the documented schema) says, for every kind of job.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from apps.accounts.models import Role
from apps.advice.models import AdviceSummary
from apps.api.jobs.serializers import (
    JOB_LIST_COLUMNS,
    JobListOutputSerializer,
    JobOutputSerializer,
    job_output,
    job_row_output,
)
from apps.jobs.models import TrainingJob
from tests.support.world import World, grant, training_job

pytestmark = pytest.mark.django_db


def serializer_view(job: TrainingJob) -> dict[str, Any]:
    return dict(
        JobOutputSerializer(
            TrainingJob.objects.select_related("cluster", "current_revision").get(pk=job.pk)
        ).data
    )


def test_hand_rendered_rows_equal_the_serializer(world: World) -> None:
    deleted = training_job(world.cluster, "gone")
    TrainingJob.objects.filter(pk=deleted.pk).update(deleted_at=timezone.now(), uid="u-1", phase="Failed")
    TrainingJob.objects.filter(pk=deleted.pk).update(last_fault_at=timezone.now())
    AdviceSummary.objects.create(job=world.job, could_save=12.3456, computed_at=timezone.now())
    TrainingJob.objects.filter(pk=world.job.pk).update(could_save=12.3456)
    jobs = [world.job, world.other_job, deleted]  # with a policy revision, without, deleted
    rows = {row["id"]: row for row in TrainingJob.objects.values(*JOB_LIST_COLUMNS)}
    listed = TrainingJob.objects.select_related("cluster", "current_revision")
    for job in jobs:
        expected = serializer_view(job)
        assert job_row_output(rows[job.pk], JobOutputSerializer.Meta.fields) == expected
        loaded = TrainingJob.objects.select_related("cluster", "current_revision").get(pk=job.pk)
        assert job_output(loaded) == expected
        as_listed = dict(JobListOutputSerializer(listed.get(pk=job.pk)).data)
        if as_listed["could_save"] is not None:
            as_listed["could_save"] = round(
                as_listed["could_save"], 2
            )  # the list rounds it, as the advice does
        assert job_row_output(rows[job.pk]) == as_listed
    assert serializer_view(world.job)["current_revision"] == 1
    assert serializer_view(world.job)["strategies"] == world.job.current_revision.spec["strategies"]


def test_list_pages_walk_the_order_without_gaps_or_repeats(world: World) -> None:
    for i in range(23):
        training_job(world.cluster, f"p-{i:02d}", namespace="team-a" if i % 2 else "team-c")
    # Admin on team-a (group grant); add team-c directly: the list spans two namespaces and two grants.
    grant(Role.VIEWER, user=world.users["admin"], cluster=world.cluster, namespace="team-c")
    client = world.client("admin")
    seen: list[tuple[str, str]] = []
    offset = 0
    while True:
        body = client.get(f"/api/v1/jobs/?limit=7&offset={offset}").json()
        seen += [(row["namespace"], row["name"]) for row in body["results"]]
        offset += 7
        if body["next"] is None:
            break
    assert body["count"] == len(seen) == 24  # the 23 above and llama; not secret (team-b)
    assert seen == sorted(seen)
    assert len(set(seen)) == len(seen)


def test_hand_rendered_in_effect_and_sync_equal_the_serializers(world: World) -> None:
    """The detail and policy GET render in_effect and the latest sync by hand (apps/core/api_output.py)."""
    from apps.api.policies.serializers import (
        InEffectSerializer,
        SyncOutputSerializer,
        in_effect_output,
        sync_output,
    )
    from apps.jobs.incarnations import incarnation_observe_podgroup
    from apps.policies.in_effect import in_effect
    from apps.policies.models import PolicySync
    from tests.support.world import operator_podgroup

    job = TrainingJob.objects.select_related("cluster", "current_revision").get(pk=world.job.pk)
    views = [in_effect(job)]  # not observed yet
    job.uid = "uid-1"
    job.save(update_fields=["uid"])
    incarnation_observe_podgroup(job, operator_podgroup(job, {}, {}), "ingester")
    views.append(in_effect(job))  # observed, process-level recovery off, a revision waiting
    assert views[1]["since"] is not None and views[1]["pending"]
    for view in views:
        assert in_effect_output(view) == dict(InEffectSerializer(view).data)
    sync = PolicySync.objects.filter(job=job).first()
    assert sync is not None
    PolicySync.objects.filter(pk=sync.pk).update(
        started_at=timezone.now(), finished_at=timezone.now(), drift={"x": 1}, effects=[{"k": "v"}]
    )
    for row in PolicySync.objects.filter(pk=sync.pk):
        assert sync_output(row) == dict(SyncOutputSerializer(row).data)


# The list's pages are rendered by PostgreSQL (apps/api/jobs/list_rows.py). Against the Python
# rendering of the same request (the path of other databases), byte for byte after parsing: every
# kind of row (timestamps on a whole second and not, none, every strategy list, replicas, advice
# figures, deleted jobs), every sort, filters, the links, and a page past the end.
def _sql_and_python_bodies(client: Any, path: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    from apps.api.jobs import views

    by_sql = client.get(path)
    with monkeypatch.context() as patched:
        patched.setattr(views, "database_renders_datetimes", lambda: False)
        by_python = client.get(path)
    assert by_sql.status_code == by_python.status_code == 200
    assert by_sql["Content-Type"] == by_python["Content-Type"] == "application/json"
    return by_sql.json(), by_python.json()


def test_database_rendered_pages_equal_the_python_rendering(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import UTC, datetime

    from apps.api.jobs.ordering import ORDERING_CHOICES
    from tests.support.jobs_list import add_jobs

    add_jobs(world, 14)
    whole_second = datetime(2026, 12, 7, 20, 34, 39, tzinfo=UTC)
    odd = training_job(world.cluster, "odd-one")
    TrainingJob.objects.filter(pk=odd.pk).update(
        created_at=whole_second,
        updated_at=whole_second.replace(microsecond=1),
        last_fault_at=whole_second.replace(microsecond=999999),
        replicas={},
        strategies="retry,recover,recover-in-place,elastic-training,dump,exit",
        could_save=round(12.345, 2),
        phase="Ünïcode\u2028phase",
        uid="",
    )
    gone = training_job(world.cluster, "gone")
    TrainingJob.objects.filter(pk=gone.pk).update(deleted_at=whole_second, could_save=1e12)
    client = world.client("owner")
    paths = [f"/api/v1/jobs/?ordering={ordering}&limit=6&offset=2" for ordering in ORDERING_CHOICES]
    paths += [
        "/api/v1/jobs/",
        "/api/v1/jobs/?include_deleted=true&limit=500",
        "/api/v1/jobs/?strategy=recover&limit=3",
        "/api/v1/jobs/?could_save_min=1&ordering=-could_save",
        "/api/v1/jobs/?q=odd",
        "/api/v1/jobs/?limit=5&offset=10000",  # past the end: counted on its own
        "/api/v1/jobs/?namespace=nowhere",
    ]
    for path in paths:
        by_sql, by_python = _sql_and_python_bodies(client, path, monkeypatch)
        assert by_sql == by_python, path
    listed = client.get("/api/v1/jobs/?q=odd").json()["results"]
    assert listed[0]["created_at"] == "2026-12-07T20:34:39Z"
    assert listed[0]["updated_at"] == "2026-12-07T20:34:39.000001Z"
    assert listed[0]["could_save"] == 12.35 or listed[0]["could_save"] == round(12.345, 2)
    # What JSONRenderer does to the line separators JavaScript does not allow in a string.
    assert b"\\u2028" in client.get("/api/v1/jobs/?q=odd").content


def test_the_latest_push_selected_with_the_job_is_the_one_read_alone(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The policy GET's latest push is written by PostgreSQL with the job (apps/api/policies/bodies.py):
    the same bytes as reading the row and rendering it in Python, for a job never pushed, a push
    queued (whole-second timestamps, no duration), one finished (microseconds, a duration, drift
    and effects), and the newest of several."""
    from datetime import UTC, datetime, timedelta

    from apps.api.policies import bodies
    from apps.policies.models import PolicySync

    job = world.job
    url = f"/api/v1/jobs/{job.pk}/policy/"
    client = world.client("owner")

    def both() -> tuple[bytes, bytes]:
        selected = client.get(url)
        with monkeypatch.context() as patched:
            patched.setattr(bodies, "database_renders_datetimes", lambda: False)
            read_alone = client.get(url)
        assert selected.status_code == read_alone.status_code == 200
        return selected.content, read_alone.content

    PolicySync.objects.filter(job=job).delete()
    selected, read_alone = both()
    assert selected == read_alone and b'"sync":null' in selected
    revision = job.current_revision
    assert revision is not None
    queued = datetime(2026, 12, 7, 21, 0, 0, tzinfo=UTC)
    first = PolicySync.objects.create(job=job, revision=revision, generation=revision.number)
    PolicySync.objects.filter(pk=first.pk).update(queued_at=queued)
    selected, read_alone = both()
    assert selected == read_alone and b'"duration_ms":null' in selected
    PolicySync.objects.filter(pk=first.pk).update(
        started_at=queued + timedelta(microseconds=1),
        finished_at=queued + timedelta(seconds=1, microseconds=234567),
        checked_at=queued + timedelta(days=2),
        state="applied",
        attempts=2,
        last_error="ü\u2028",
        drift=["hccl.json", {"k": [1, 2.5]}],
        effects=[{"key": "v", "when": "live"}],
        applied_resource_versions={"AscendJob": "42"},
    )
    selected, read_alone = both()
    assert selected == read_alone and b'"duration_ms":1234.567' in selected
    PolicySync.objects.filter(pk=first.pk).update(finished_at=queued + timedelta(seconds=1))
    selected, read_alone = both()
    assert selected == read_alone and b'"duration_ms":1000.0' in selected
    newer = PolicySync.objects.create(job=job, revision=revision, generation=revision.number + 1)
    selected, read_alone = both()
    assert selected == read_alone and f'"id":{newer.pk}'.encode() in selected

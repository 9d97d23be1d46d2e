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

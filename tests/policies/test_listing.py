"""The jobs list's sort columns (``apps/policies/listing.py``) follow the facts they copy: the current
revision's strategies, the in-effect comparison once an incarnation is observed, the newest incident."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from apps.audit.actors import Actor
from apps.events.models import Incident
from apps.jobs.incarnations import incarnation_observe_podgroup
from apps.jobs.models import TrainingJob
from apps.policies.listing import last_fault_refresh
from apps.policies.observed import in_effect_briefs
from apps.policies.services import policy_revision_create
from mindcluster import keys as c
from tests.support.world import World, operator_podgroup, training_job

pytestmark = pytest.mark.django_db


def columns(job: TrainingJob) -> tuple[str, str, Any]:
    row = TrainingJob.objects.get(pk=job.pk)
    return row.strategies, row.in_effect_state, row.last_fault_at


def test_columns_follow_revisions_incarnations_and_incidents(
    world: World, django_capture_on_commit_callbacks: Any
) -> None:
    job = training_job(world.cluster, "tracked", uid="uid-1")
    assert columns(job) == ("", "unknown", None)
    policy_revision_create(job=job, spec={"strategies": ["retry", "dump"]}, actor=Actor(name="t"))
    assert columns(job)[:2] == ("retry,dump", "unknown")  # nothing observed yet
    # The operator created the PodGroup without recover-strategy: revision 1 waits for a recreation.
    with django_capture_on_commit_callbacks(execute=True):
        incarnation_observe_podgroup(job, operator_podgroup(job, {}, {}), "ingester")
    assert columns(job)[1] == "waiting"
    # A later incarnation created with the revision's keys: in effect.
    job.uid = "uid-2"
    job.save(update_fields=["uid"])
    annotations = {c.ANNOTATION_RECOVER_STRATEGY: "retry,dump", c.ANNOTATION_POLICY_REVISION: "1"}
    with django_capture_on_commit_callbacks(execute=True):
        incarnation_observe_podgroup(
            job, operator_podgroup(job, {"fault-scheduling": "grace"}, annotations), "ingester"
        )
    assert columns(job)[1] == "in-effect"
    loaded = TrainingJob.objects.select_related("current_revision").get(pk=job.pk)
    assert in_effect_briefs([loaded])[job.pk]["state"] == "in-effect"  # the column says what the rows say
    # A new revision the running incarnation was not created with: waiting again, at once.
    policy_revision_create(job=job, spec={"strategies": ["recover"]}, actor=Actor(name="t"))
    assert columns(job)[:2] == ("recover", "waiting")
    # Incidents: the newest opening time.
    now = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        Incident.objects.create(
            job=job,
            number=1,
            opened_at=now - timedelta(hours=2),
            first_seq=1,
            last_seq=1,
            closed_at=now - timedelta(hours=1),
        )
        Incident.objects.create(job=job, number=2, opened_at=now, first_seq=2, last_seq=2)
    assert columns(job)[2] == now


def test_last_fault_refresh_writes_only_a_change_and_once_per_transaction(
    world: World, django_capture_on_commit_callbacks: Any
) -> None:
    job = training_job(world.cluster, "refreshed", uid="uid-r")
    now = timezone.now()
    # Two saves of one job's incident in one transaction: one refresh after the commit.
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        incident = Incident.objects.create(job=job, number=1, opened_at=now, first_seq=1, last_seq=1)
        incident.last_seq = 2
        incident.save()
    assert len(callbacks) == 1
    assert columns(job)[2] == now
    # Unchanged: the UPDATE matches no row (no write to flush).
    assert last_fault_refresh(job.pk) == 0
    assert columns(job)[2] == now
    # Null-safe both ways: no incident left clears it; a stale copy is corrected.
    Incident.objects.filter(job=job).delete()
    assert last_fault_refresh(job.pk) == 1
    assert columns(job)[2] is None
    Incident.objects.create(job=job, number=2, opened_at=now - timedelta(hours=1), first_seq=3, last_seq=3)
    TrainingJob.objects.filter(pk=job.pk).update(last_fault_at=now)
    assert last_fault_refresh(job.pk) == 1
    assert columns(job)[2] == now - timedelta(hours=1)

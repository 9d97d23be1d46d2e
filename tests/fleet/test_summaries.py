"""Keeping the fleet summaries as incidents close (``apps.fleet.summaries``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from apps.events import kinds
from apps.events.models import Incident, JobEvent
from apps.fleet import summaries
from apps.fleet.models import JobDay, NamespaceDay
from tests.support.fleet import Fleet, incident, retry_incident

pytestmark = pytest.mark.django_db


def test_a_late_outcome_recounts_the_incident_once(fleet: Fleet) -> None:
    """gpt's rescheduling, then a dump saved reported late: no rollback any more, still one fault."""
    before = JobDay.objects.get(job=fleet.gpt)
    assert (before.faults, before.rollbacks) == (1, 1)
    incident(fleet.gpt, fleet.faults_at, [(213, kinds.DUMP_SAVED, {"status": "dump-success"})])
    after = JobDay.objects.get(job=fleet.gpt)
    assert (after.faults, after.rollbacks, after.rollback_npus) == (1, 0, 0)
    day = NamespaceDay.objects.get(cluster=fleet.east, namespace="team-a", day=fleet.faults_at.date())
    assert (day.faults, day.rollbacks) == (3, 0)  # llama's two and gpt's one


def test_an_open_incident_is_not_counted_until_it_closes(fleet: Fleet) -> None:
    at = fleet.faults_at + timedelta(hours=3)
    incident(fleet.bert, at, [(0, kinds.FAULT_DETECTED, {"code": "X1", "fault_type": "uce", "ranks": [0]})])
    assert JobDay.objects.get(job=fleet.bert).faults == 1
    assert Incident.objects.filter(job=fleet.bert, closed_at__isnull=True).count() == 1


def test_a_summary_that_fails_does_not_cost_the_event(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(job_id: int, day: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(summaries, "job_day_refresh", broken)
    stored = JobEvent.objects.count()
    retry_incident(fleet.bert, fleet.faults_at + timedelta(hours=5), "80C98009")
    assert JobEvent.objects.count() == stored + 4
    assert Incident.objects.filter(job=fleet.bert).count() == 2
    assert JobDay.objects.get(job=fleet.bert).faults == 1  # not recounted: fleet_rebuild will


def test_scheduled_time_counts_the_days_a_job_existed(fleet: Fleet) -> None:
    now = fleet.created + timedelta(days=1, hours=6)
    summaries.scheduled_refresh([fleet.created.date(), (fleet.created + timedelta(days=1)).date()], now)
    first, second = NamespaceDay.objects.filter(cluster=fleet.east, namespace="team-a").order_by("day")[:2]
    assert first.npu_s_scheduled == (16 + 32) * 86_400  # llama and gpt, the whole day
    assert second.npu_s_scheduled == (16 + 32) * 6 * 3_600  # until "now", 06:00
    assert (first.jobs, second.jobs) == (2, 2)

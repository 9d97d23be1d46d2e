"""Retention (issue #26): old events, incidents and audit entries pruned in batches by primary-key
range, each job's newest event and incident and every open incident kept, the fleet summaries kept."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from apps.audit.models import AuditEntry
from apps.events.models import Incident, JobEvent
from apps.events.services import event_record
from apps.fleet import retention
from apps.fleet.models import JobDay, NamespaceDay
from apps.fleet.summaries import scheduled_refresh_recent
from apps.fleet.tasks import prune_history
from tests.support.fleet import Fleet
from tests.support.world import superuser_api_client

pytestmark = pytest.mark.django_db
EVENTS = retention.TABLES[0]


def test_defaults_keep_a_quarter_and_beat_runs_the_prune() -> None:
    assert settings.RETENTION_EVENTS_DAYS == settings.RETENTION_INCIDENTS_DAYS == 92
    assert settings.RETENTION_AUDIT_DAYS == 92
    assert settings.RETENTION_BATCH_ROWS == 5_000
    tasks = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert {"fleet.prune_history", "fleet.refresh_scheduled"} <= tasks


def test_old_events_go_in_batches_of_id_ranges_keeping_each_jobs_newest(fleet: Fleet) -> None:
    for i in range(20):
        event_record(job=fleet.llama, kind="job.warning", message=f"old {i}", source="test")
    long_ago = timezone.now() - timedelta(days=100)
    JobEvent.objects.update(stored_at=long_ago)
    newest = {
        job.pk: JobEvent.objects.filter(job=job).order_by("-seq").first()
        for job in (fleet.llama, fleet.gpt, fleet.bert)
    }
    ids = list(JobEvent.objects.order_by("pk").values_list("pk", flat=True))
    deleted, batches = retention.prune_table(
        EVENTS, cutoff=timezone.now() - timedelta(days=92), batch_rows=7, max_batches=1_000
    )
    assert deleted == len(ids) - 3
    assert batches == (ids[-1] - ids[0]) // 7 + 1  # one transaction per range of 7 ids
    left = set(JobEvent.objects.values_list("pk", flat=True))
    assert left == {e.pk for e in newest.values()}
    # The next event of a job continues its seq.
    stored = event_record(job=fleet.llama, kind="job.warning", message="new", source="test")
    assert stored is not None and stored.seq == newest[fleet.llama.pk].seq + 1


def test_a_run_stops_after_its_batch_budget_and_the_next_continues(fleet: Fleet) -> None:
    JobEvent.objects.update(stored_at=timezone.now() - timedelta(days=100))
    total = JobEvent.objects.count()
    cutoff = timezone.now() - timedelta(days=92)
    first, batches = retention.prune_table(EVENTS, cutoff=cutoff, batch_rows=2, max_batches=2)
    assert batches == 2 and 0 < first < total - 3
    rest, _ = retention.prune_table(EVENTS, cutoff=cutoff, batch_rows=2, max_batches=1_000)
    assert first + rest == total - 3


def test_open_and_newest_incidents_and_recent_audit_stay(fleet: Fleet) -> None:
    old = timezone.now() - timedelta(days=100)
    Incident.objects.update(opened_at=old, closed_at=old)
    AuditEntry.objects.create(actor_name="system:test", action="job.adopt", object_type="job", object_id="1")
    stale = AuditEntry.objects.create(
        actor_name="system:test", action="job.adopt", object_type="job", object_id="2"
    )
    AuditEntry.objects.filter(pk=stale.pk).update(created_at=old)
    # An incident still open, opened long ago: a recovery in progress is never pruned.
    Incident.objects.filter(job=fleet.bert).update(closed_at=None)
    report = prune_history.run()
    assert report["incidents"]["deleted"] == 1  # llama's first; its second is its newest
    assert sorted(Incident.objects.values_list("job__name", "number")) == [
        ("bert", 1),
        ("gpt", 1),
        ("llama", 2),
    ]
    assert report["audit"]["deleted"] == 1
    assert not AuditEntry.objects.filter(pk=stale.pk).exists()


@override_settings(RETENTION_BATCH_ROWS=2)
def test_the_fleet_view_over_the_window_survives_pruning(fleet: Fleet) -> None:
    scheduled_refresh_recent()
    client = superuser_api_client()
    before = client.get("/api/v1/fleet/").json()
    summaries = (JobDay.objects.count(), NamespaceDay.objects.count())
    # Everything raw is past its window (a prune run 93 days from now).
    report = retention.prune_history(now=timezone.now() + timedelta(days=93))
    assert report["events"]["deleted"] > 0 and report["incidents"]["deleted"] == 1
    assert (JobDay.objects.count(), NamespaceDay.objects.count()) == summaries
    after = client.get("/api/v1/fleet/").json()
    assert after["total"] == before["total"]
    assert after["top_jobs"] == before["top_jobs"]

"""Recording events: store first (with the next per-job seq), broadcast after commit."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.events import incident_services
from apps.events.models import Incident, JobEvent
from apps.jobs.models import TrainingJob

# Sentinel for "find the incident yourself" (callers outside the ingester).
_AUTO: Any = object()


def event_record(
    *,
    job: TrainingJob,
    kind: str,
    message: str,
    source: str,
    severity: str = JobEvent.Severity.INFO,
    data: dict[str, Any] | None = None,
    occurred_at: datetime | None = None,
    dedupe_key: str = "",
) -> JobEvent | None:
    """Store one event with the job's next ``seq``; returns None when ``dedupe_key`` was seen.

    The job row is locked for the insert, so two writers (two ingesters, a worker and an
    ingester) serialise per job and ``seq`` stays gap-free and unique. The event is folded into
    the job's incident and restart budget in the same transaction and broadcast after commit.
    """
    return event_store(
        job=job,
        kind=kind,
        message=message,
        source=source,
        severity=severity,
        data=data,
        occurred_at=occurred_at,
        dedupe_key=dedupe_key,
    )


def job_lock(job: TrainingJob) -> None:
    """Lock the job row until the end of the current transaction (the per-job writer lock)."""
    TrainingJob.objects.select_for_update().filter(pk=job.pk).values_list("pk", flat=True).get()


def _lock_and_last_seq(job: TrainingJob) -> int:
    """Take the job's writer lock, then read its newest seq (0 when none): the next is this + 1."""
    job_lock(job)
    return JobEvent.objects.filter(job=job).order_by("-seq").values_list("seq", flat=True).first() or 0


def event_store(
    *,
    job: TrainingJob,
    kind: str,
    message: str,
    source: str,
    severity: str = JobEvent.Severity.INFO,
    data: dict[str, Any] | None = None,
    occurred_at: datetime | None = None,
    dedupe_key: str = "",
    incident: Incident | None = _AUTO,
) -> JobEvent | None:
    """``event_record`` with an explicit incident (the ingester chose it under the same lock)."""
    try:
        with transaction.atomic():
            last = _lock_and_last_seq(job)
            if dedupe_key and JobEvent.objects.filter(job=job, dedupe_key=dedupe_key).exists():
                return None
            event = JobEvent.objects.create(
                job=job,
                seq=last + 1,
                kind=kind,
                severity=severity,
                message=message[:500],
                source=source,
                dedupe_key=dedupe_key[:200],
                data=data or {},
                occurred_at=occurred_at or timezone.now(),
            )
            incident_services.incident_follow(event, None if incident is _AUTO else incident)
            incident_services.budget_follow(event)
    except IntegrityError:
        if dedupe_key:
            return None
        raise
    transaction.on_commit(lambda: _after_commit(event))
    return event


@dataclass(frozen=True)
class NewEvent:
    """One event for ``event_record_many``."""

    kind: str
    message: str
    source: str
    severity: str = JobEvent.Severity.INFO
    data: dict[str, Any] = field(default_factory=dict)
    occurred_at: datetime | None = None


def event_record_many(*, job: TrainingJob, events: list[NewEvent]) -> list[JobEvent]:
    """Store a burst of one job's events in one transaction: one lock, one seq read, one insert.

    The same guarantees as ``event_record`` (gap-free ``seq`` under the job lock, incidents and
    budget followed, broadcast after commit), at a fraction of the cost per event: a producer
    that falls behind (thousands of fault reports at once) stores what is due in one go.
    Events with a ``dedupe_key`` go through ``event_record``: they need a check each.
    """
    if not events:
        return []
    now = timezone.now()
    with transaction.atomic():
        last = _lock_and_last_seq(job)
        stored = JobEvent.objects.bulk_create(
            [
                JobEvent(
                    job=job,
                    seq=last + offset,
                    kind=new.kind,
                    severity=new.severity,
                    message=new.message[:500],
                    source=new.source,
                    data=new.data,
                    occurred_at=new.occurred_at or now,
                )
                for offset, new in enumerate(events, start=1)
            ]
        )
        for event in stored:
            incident_services.incident_follow(event, None)
            incident_services.budget_follow(event)
    transaction.on_commit(lambda: _after_commit_many(stored))
    return stored


def _after_commit_many(events: list[JobEvent]) -> None:
    from apps.events import broadcast, metrics

    for event in events:
        metrics.event_stored(event)
    broadcast.broadcast_events(events)


def _after_commit(event: JobEvent) -> None:
    from apps.events import broadcast, metrics

    metrics.event_stored(event)
    broadcast.broadcast_event(event)

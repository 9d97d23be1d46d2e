"""Recording events: store first (with the next per-job seq), broadcast after commit."""

from __future__ import annotations

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
            job_lock(job)
            if dedupe_key and JobEvent.objects.filter(job=job, dedupe_key=dedupe_key).exists():
                return None
            last = (
                JobEvent.objects.filter(job=job).order_by("-seq").values_list("seq", flat=True).first() or 0
            )
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


def _after_commit(event: JobEvent) -> None:
    from apps.events import broadcast, metrics

    metrics.event_stored(event)
    broadcast.broadcast_event(event)

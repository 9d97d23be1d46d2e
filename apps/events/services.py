"""Recording events: store first (with the next per-job seq), broadcast after commit."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.events.models import JobEvent
from apps.jobs.models import TrainingJob


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
    ingester) serialise per job and ``seq`` stays gap-free and unique.
    """
    try:
        with transaction.atomic():
            TrainingJob.objects.select_for_update().filter(pk=job.pk).values_list("pk", flat=True).get()
            if dedupe_key and JobEvent.objects.filter(job=job, dedupe_key=dedupe_key).exists():
                return None
            last = (
                JobEvent.objects.filter(job=job).order_by("-seq").values_list("seq", flat=True).first() or 0
            )
            return JobEvent.objects.create(
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
    except IntegrityError:
        if dedupe_key:
            return None
        raise

"""Reads for the websocket, the incidents endpoint and webhooks: who may see which job, events after a seq."""

from __future__ import annotations

from typing import Any

from django.db.models import Max, QuerySet

from apps.events.models import Incident, JobEvent
from apps.jobs.models import TrainingJob


def jobs_visible_to(user: Any) -> QuerySet[TrainingJob]:
    """Per-namespace visibility from ``apps.accounts`` (superusers see every job)."""
    from apps.accounts.selectors import jobs_visible_to as accounts_jobs_visible_to

    return accounts_jobs_visible_to(user)


def job_visible(user: Any, job_id: int) -> bool:
    return jobs_visible_to(user).filter(pk=job_id).exists()


def visible_job_ids(user: Any) -> set[int]:
    return set(jobs_visible_to(user).values_list("pk", flat=True))


def events_after(job_id: int, after_seq: int, limit: int) -> list[dict[str, Any]]:
    """Stored events of a job with ``seq > after_seq``, oldest first, as websocket frames."""
    rows = JobEvent.objects.filter(job_id=job_id, seq__gt=after_seq).order_by("seq")[:limit]
    return [event.as_message() for event in rows]


def head_seqs(job_ids: list[int]) -> dict[int, int]:
    """The newest stored ``seq`` of each job (one grouped query)."""
    if not job_ids:
        return {}
    rows = JobEvent.objects.filter(job_id__in=job_ids).values("job_id").annotate(head=Max("seq")).order_by()
    return {row["job_id"]: row["head"] for row in rows}


def incidents_of(job: TrainingJob) -> QuerySet[Incident]:
    return Incident.objects.filter(job=job).order_by("-number")

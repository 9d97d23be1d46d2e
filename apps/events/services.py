"""Recording events: store first (with the next per-job seq), broadcast after commit."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.events import incident_services, kinds, rows
from apps.events.incidents import INCIDENT_KINDS
from apps.events.models import Incident, JobEvent, SourceKey
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
        observed=False,
    )


def job_lock(job: TrainingJob) -> None:
    """Lock the job row until the end of the current transaction (the per-job writer lock)."""
    rows.job_lock(job.pk)


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
    severity: str | None = None,
    data: dict[str, Any] | None = None,
    occurred_at: datetime | None = None,
    dedupe_key: str = "",
    source_key: str = "",
    observed: bool = True,
) -> JobEvent | None:
    """``event_record`` for observers of the cluster: the one place that chooses an event's incident.

    Under the job's lock, an incident-scoped kind is planned into its incident
    (``incident_services.incident_plan``): it may be renamed (a second strategy is
    ``strategy.changed``), given a key two sources share, or only enrich the incident it belongs
    to (then nothing is stored: None); ``observed=False`` (``event_record``: a producer that states
    what happened, not a report of the cluster) stores the kind as given. ``severity`` None is the
    stored kind's own. ``source_key``
    names the source record this event comes from (a Kubernetes Event): one already handled
    (a replay after a restart or relist) stores nothing. A ``dedupe_key`` already stored stores
    nothing either (the insert skips it: ``rows.event_insert``).

    No savepoint of its own (two statements per event inside the ingester's transaction): nothing in
    it is expected to fail, so an error rolls back the caller's transaction with it.
    """
    data = dict(data or {})
    at = occurred_at or timezone.now()
    with transaction.atomic(savepoint=False):
        job_lock(job)
        if source_key and not rows.source_key_remember(job.pk, source_key):
            return None
        incident: Incident | None = None
        if observed and kind in INCIDENT_KINDS:
            plan = incident_services.incident_plan(
                job=job, kind=kind, data=data, at=at, source_key=dedupe_key
            )
            if plan.enrich_only:
                assert plan.incident is not None
                incident_services.incident_enrich(plan.incident, data, at)
                return None
            kind, data, incident = plan.kind, plan.data, plan.incident
            dedupe_key = plan.dedupe_key or dedupe_key
        event = rows.event_insert(
            job,
            kind=kind,
            severity=severity or kinds.severity_of(kind),
            message=message[:500],
            source=source,
            dedupe_key=dedupe_key,
            data=data,
            occurred_at=at,
        )
        if event is None:
            return None
        incident_services.incident_follow(event, incident)
        incident_services.budget_follow(event)
    transaction.on_commit(lambda: _after_commit(event))
    return event


def source_keys_prune(*, cluster_id: int, older_than: timedelta) -> int:
    """Forget handled source records older than ``older_than`` (their source no longer replays them)."""
    cutoff = timezone.now() - older_than
    deleted, _ = SourceKey.objects.filter(job__cluster_id=cluster_id, created_at__lt=cutoff).delete()
    return deleted


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
    for event in events:
        metrics.event_handed_to_broadcast(event)


def _after_commit(event: JobEvent) -> None:
    from apps.events import broadcast, metrics

    metrics.event_stored(event)
    broadcast.broadcast_event(event)
    metrics.event_handed_to_broadcast(event)

"""Keeping the fleet summaries: as incidents close, from the job rows for scheduled time, and from
history on demand.

- ``on_incident_changed``: the events app saved a closed incident (``apps.events.signals``), inside
  its transaction with the job row locked. The job-day's tally is recomputed from that job's closed
  incidents of that day (a handful of rows), and its namespace-day gets the difference: idempotent,
  and an incident changed after it closed is counted once, as it is now.
- ``scheduled_refresh``: NPU time scheduled per namespace and day, from the jobs' own rows (their NPUs,
  created and deleted times); the beat task runs it for today and yesterday.
- ``rebuild``: both from the incidents still stored and the job rows (``manage.py fleet_rebuild``).
  Days older than the oldest stored incident are left as they are: their incidents may be pruned.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.advice.lost import job_npus
from apps.events.models import Incident
from apps.fleet import counts
from apps.fleet.figures import FIELDS, INCIDENT_FIELDS, Tally
from apps.fleet.models import JobDay, NamespaceDay
from apps.jobs.models import TrainingJob

ONE_DAY = timedelta(days=1)
log = logging.getLogger(__name__)


def day_of(at: datetime) -> date:
    """The UTC day an instant counts in."""
    return at.astimezone(UTC).date()


def day_bounds(day: date) -> tuple[datetime, datetime]:
    start = datetime.combine(day, time.min, tzinfo=UTC)
    return start, start + ONE_DAY


def _closed_incidents(job_id: int, day: date) -> Iterable[dict[str, Any]]:
    start, end = day_bounds(day)
    return (
        Incident.objects.filter(
            job_id=job_id, closed_at__isnull=False, opened_at__gte=start, opened_at__lt=end
        )
        .order_by("pk")
        .values(*INCIDENT_FIELDS)
    )


def job_day_refresh(job_id: int, day: date) -> None:
    """Recount one job's day from its closed incidents and move its namespace-day by the difference.

    Runs in the caller's transaction; the caller holds the job's writer lock (the events app does),
    so two refreshes of one job-day never interleave.
    """
    job = TrainingJob.objects.values("cluster_id", "namespace", "npus_per_pod", "replicas").get(pk=job_id)
    npus = job_npus(job["npus_per_pod"], job["replicas"])
    new = Tally.of_incidents(_closed_incidents(job_id, day), npus)
    row = JobDay.objects.filter(job_id=job_id, day=day).first()
    old = Tally.of_row(row) if row is not None else Tally()
    if row is None and not new.empty:
        JobDay.objects.create(
            job_id=job_id,
            day=day,
            cluster_id=job["cluster_id"],
            namespace=job["namespace"],
            npus=npus,
            **new.fields(),
        )
    elif row is not None and new.empty:
        row.delete()
    elif row is not None:
        for name, value in new.fields().items():
            setattr(row, name, value)
        row.npus = npus
        row.save()
    delta = new.minus(old)
    if delta.fields() != Tally().fields():
        _namespace_day_add(job["cluster_id"], job["namespace"], day, delta)


def _namespace_day_add(cluster_id: int, namespace: str, day: date, delta: Tally) -> None:
    """Add ``delta`` to the namespace-day under its row lock (taken after the job lock, always)."""
    NamespaceDay.objects.bulk_create(
        [NamespaceDay(cluster_id=cluster_id, namespace=namespace, day=day)], ignore_conflicts=True
    )
    row = NamespaceDay.objects.select_for_update().get(cluster_id=cluster_id, namespace=namespace, day=day)
    tally = Tally.of_row(row)
    tally.add(delta)
    for name, value in tally.fields().items():
        setattr(row, name, value)
    row.save(update_fields=[*FIELDS, "updated_at"])  # the scheduled time is the beat task's
    counts.add(cluster_id, namespace, day, delta)


def on_incident_changed(sender: Any, *, incident: Incident, previous_opened_at: datetime, **_: Any) -> None:
    """Receiver of ``apps.events.signals.incident_changed``: the incident's day (and the day it counted
    in before, when a merged report moved its start across midnight)."""
    try:
        # A savepoint: a summary that cannot be kept must not cost the event its storage (the
        # incident and its events commit; ``fleet_rebuild`` recounts the day later).
        with transaction.atomic():
            for day in sorted({day_of(incident.opened_at), day_of(previous_opened_at)}):
                job_day_refresh(incident.job_id, day)
    except Exception:  # a bug or a database error alike: the event is what must be kept
        log.exception("fleet summary of job %s not kept; run manage.py fleet_rebuild", incident.job_id)


# --- scheduled time ---------------------------------------------------------------------------------
def _overlap_s(start: datetime, end: datetime, day: date) -> float:
    low, high = day_bounds(day)
    return max(0.0, (min(end, high) - max(start, low)).total_seconds())


def _scheduled(days: list[date], now: datetime) -> dict[tuple[int, str, date], tuple[float, int]]:
    """``(cluster, namespace, day) -> (NPU-seconds, jobs)`` for the jobs that existed on ``days``.

    A job counts from its row's creation to its deletion (or now), with the NPUs it holds now: the same
    span the strategy advice prices a job's faults over.
    """
    first, _ = day_bounds(min(days))
    _, last = day_bounds(max(days))
    wanted = set(days)
    jobs = (
        TrainingJob.objects.filter(created_at__lt=last)
        .exclude(deleted_at__lt=first)
        .values_list("cluster_id", "namespace", "created_at", "deleted_at", "npus_per_pod", "replicas")
        .iterator(chunk_size=5_000)
    )
    out: dict[tuple[int, str, date], list[float]] = defaultdict(lambda: [0.0, 0])
    for cluster_id, namespace, created, deleted, npus_per_pod, replicas in jobs:
        npus = job_npus(npus_per_pod, replicas)
        end = min(deleted or now, now)
        day = max(day_of(created), min(days))
        while day <= min(day_of(end), max(days)):
            if day in wanted:
                seconds = _overlap_s(created, end, day)
                if seconds > 0:
                    cell = out[(cluster_id, namespace, day)]
                    cell[0] += seconds * npus
                    cell[1] += 1
            day += ONE_DAY
    return {key: (value[0], int(value[1])) for key, value in out.items()}


def scheduled_refresh(days: list[date], now: datetime | None = None) -> int:
    """Set the NPU time scheduled of every namespace on ``days`` (absolute values: safe to repeat)."""
    now = now or timezone.now()
    figures = _scheduled(days, now)
    with transaction.atomic():
        NamespaceDay.objects.filter(day__in=days).update(npu_s_scheduled=0.0, jobs=0)
        NamespaceDay.objects.bulk_create(
            [
                NamespaceDay(cluster_id=c, namespace=ns, day=d, npu_s_scheduled=seconds, jobs=count)
                for (c, ns, d), (seconds, count) in figures.items()
            ],
            batch_size=2_000,
            update_conflicts=True,
            unique_fields=["cluster", "namespace", "day"],
            update_fields=["npu_s_scheduled", "jobs"],
        )
    return len(figures)


def scheduled_refresh_recent(now: datetime | None = None) -> int:
    """Today so far, and yesterday (its last minutes happened after the previous run)."""
    now = now or timezone.now()
    today = day_of(now)
    return scheduled_refresh([today - ONE_DAY, today], now)


# --- rebuild ----------------------------------------------------------------------------------------
def rebuild(since: date | None = None, now: datetime | None = None) -> dict[str, Any]:
    """Recompute every summary from ``since`` to today (default: the oldest stored incident's day, or
    the first day retention has not pruned, whichever is later).

    Summaries of older days stay: the incidents they were made from may have been pruned.
    """
    now = now or timezone.now()
    if since is None:
        oldest = Incident.objects.order_by("opened_at").values_list("opened_at", flat=True).first()
        # Retention keeps each job's newest incident however old: only the days after the cutoff
        # still hold all of their incidents.
        complete = day_of(now - timedelta(days=settings.RETENTION_INCIDENTS_DAYS)) + ONE_DAY
        since = max(day_of(oldest), complete) if oldest else day_of(now)
    start, _ = day_bounds(since)
    npus = {
        pk: (job_npus(per_pod, replicas), cluster_id, namespace)
        for pk, per_pod, replicas, cluster_id, namespace in TrainingJob.objects.values_list(
            "pk", "npus_per_pod", "replicas", "cluster_id", "namespace"
        ).iterator(chunk_size=5_000)
    }
    job_days: dict[tuple[int, date], Tally] = defaultdict(Tally)
    rows = (
        Incident.objects.filter(closed_at__isnull=False, opened_at__gte=start)
        .values("job_id", *INCIDENT_FIELDS)
        .iterator(chunk_size=5_000)
    )
    for row in rows:
        job_days[(row["job_id"], day_of(row["opened_at"]))].add_incident(row, npus[row["job_id"]][0])
    namespace_days: dict[tuple[int, str, date], Tally] = defaultdict(Tally)
    for (job_id, day), tally in job_days.items():
        _, cluster_id, namespace = npus[job_id]
        namespace_days[(cluster_id, namespace, day)].add(tally)
    today = day_of(now)
    days = [since + timedelta(days=i) for i in range((today - since).days + 1)]
    scheduled = _scheduled(days, now)
    with transaction.atomic():
        JobDay.objects.filter(day__gte=since).delete()
        NamespaceDay.objects.filter(day__gte=since).delete()
        JobDay.objects.bulk_create(
            [
                JobDay(
                    job_id=job_id,
                    day=day,
                    cluster_id=npus[job_id][1],
                    namespace=npus[job_id][2],
                    npus=npus[job_id][0],
                    **tally.fields(),
                )
                for (job_id, day), tally in job_days.items()
            ],
            batch_size=2_000,
        )
        keys = set(namespace_days) | set(scheduled)
        NamespaceDay.objects.bulk_create(
            [
                NamespaceDay(
                    cluster_id=c,
                    namespace=ns,
                    day=d,
                    npu_s_scheduled=scheduled.get((c, ns, d), (0.0, 0))[0],
                    jobs=scheduled.get((c, ns, d), (0.0, 0))[1],
                    **namespace_days.get((c, ns, d), Tally()).fields(),
                )
                for c, ns, d in keys
            ],
            batch_size=2_000,
        )
        written = counts.rebuild(since)
    return {
        "job_days": len(job_days),
        "namespace_days": len(keys),
        "counts": written,
        "since": since.isoformat(),
    }

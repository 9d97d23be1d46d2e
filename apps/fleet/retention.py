"""Retention: job events, incidents and audit entries older than their window are deleted in small
batches, each its own short transaction over one primary-key range, so no writer waits behind the
prune for long (the ingester keeps storing; its rows are newer than any range we touch).

What stays although it is old:

- the newest event and the newest incident of every job: the next ``seq`` and incident ``number``
  are read from them, and they must keep counting up;
- open incidents (a recovery still running);
- the fleet summaries (``apps.fleet.models``), never pruned: the fleet view reads only them, so its
  figures over any window survive the raw rows they were made from.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import Max, Min, OuterRef, Q, Subquery
from django.utils import timezone

from apps.audit.models import AuditEntry
from apps.events.models import Incident, JobEvent

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Table:
    name: str
    model: type[models.Model]
    stamp: str  # the column compared with the cutoff
    days_setting: str

    def keep(self) -> Q:
        """Old rows that are kept all the same."""
        if self.model is JobEvent:
            last_seq = JobEvent.objects.filter(job=OuterRef("job")).order_by("-seq").values("seq")[:1]
            return Q(seq__gte=Subquery(last_seq))
        if self.model is Incident:
            last = Incident.objects.filter(job=OuterRef("job")).order_by("-number").values("number")[:1]
            return Q(closed_at__isnull=True) | Q(number__gte=Subquery(last))
        return Q(pk__in=[])


TABLES = (
    Table("events", JobEvent, "stored_at", "RETENTION_EVENTS_DAYS"),
    Table("incidents", Incident, "closed_at", "RETENTION_INCIDENTS_DAYS"),
    Table("audit", AuditEntry, "created_at", "RETENTION_AUDIT_DAYS"),
)


def prune_table(table: Table, *, cutoff: datetime, batch_rows: int, max_batches: int) -> tuple[int, int]:
    """Delete ``table``'s rows older than ``cutoff`` (but those kept), ``batch_rows`` ids at a time.

    Returns ``(rows deleted, batches run)``. Ids grow with time, so the old rows are the low ids: the
    walk goes from the lowest id to the highest old one, and each batch deletes within its range only.
    """
    manager = table.model._default_manager
    old = manager.filter(**{f"{table.stamp}__lt": cutoff})
    bounds = old.aggregate(low=Min("pk"), high=Max("pk"))
    if bounds["low"] is None:
        return 0, 0
    deleted = batches = 0
    low = bounds["low"]
    while low <= bounds["high"] and batches < max_batches:
        high = low + batch_rows
        with transaction.atomic():
            doomed = old.filter(pk__gte=low, pk__lt=high).exclude(table.keep())
            ids = list(doomed.values_list("pk", flat=True))
            if ids:
                deleted += manager.filter(pk__in=ids).delete()[0]
        batches += 1
        low = high
    return deleted, batches


def prune_history(now: datetime | None = None) -> dict[str, Any]:
    """The beat task's work: every table past its window, within the per-run batch budget."""
    now = now or timezone.now()
    report: dict[str, Any] = {}
    for table in TABLES:
        days = int(getattr(settings, table.days_setting))
        cutoff = now - timedelta(days=days)
        deleted, batches = prune_table(
            table,
            cutoff=cutoff,
            batch_rows=settings.RETENTION_BATCH_ROWS,
            max_batches=settings.RETENTION_MAX_BATCHES,
        )
        report[table.name] = {"deleted": deleted, "batches": batches, "older_than": cutoff.isoformat()}
        if deleted:
            log.info("retention: %s rows of %s older than %s days deleted", deleted, table.name, days)
    return report

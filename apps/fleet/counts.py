"""The narrow counts (``apps.fleet.models.NamespaceCount``): a namespace-day's JSON maps as rows, per day
and rolled up per ISO week, kept in the same transaction as the ``NamespaceDay`` they mirror.

- ``add``: a namespace-day moved by a job-day's difference (``apps.fleet.summaries``): its day rows
  and its week's rows move by the same counts, with one additive upsert each (``count = count + n``),
  so two jobs recounting different days of one week never lose each other's counts. Rows are taken in
  one sorted order, so two such upserts wait for each other instead of deadlocking.
- ``rebuild``: every count from ``since`` on, from the namespace-days themselves (``fleet_rebuild``
  and the migration that introduced the table); weeks are the sums of their stored day rows, so a
  week that began before ``since`` keeps its older days' counts.
- ``window``: which rows a window of days reads: its whole weeks as week rows, the rest as days.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import date, timedelta
from typing import Any, Final

from django.db import connection
from django.db.models import Q, QuerySet

from apps.fleet.figures import Tally
from apps.fleet.models import NamespaceCount, NamespaceDay, Span

# measure -> the Tally map it mirrors; nested maps store their outer key as ``parent``
FLAT: Final = {"kind": "by_kind", "recovery": "recoveries"}
NESTED: Final = {"strategy": "by_strategy", "source": "sources", "mttr": "mttr"}
MEASURES: Final = (*FLAT, *NESTED)
BATCH: Final = 2_000

Key = tuple[str, str, str]  # (measure, parent, item)


def monday(day: date) -> date:
    return day - timedelta(days=day.weekday())


def items(tally: Tally) -> Iterator[tuple[Key, int]]:
    """The tally's non-zero counts as ``((measure, parent, item), count)``, in a fixed order."""
    for measure, name in FLAT.items():
        for item, n in sorted(getattr(tally, name).items()):
            if n:
                yield (measure, "", str(item)), int(n)
    for measure, name in NESTED.items():
        for parent, counts in sorted(getattr(tally, name).items()):
            for item, n in sorted(counts.items()):
                if n:
                    yield (measure, str(parent), str(item)), int(n)


def window(first: date, last: date) -> list[tuple[str, date, date]]:
    """``(span, from, to)`` (inclusive) covering the days ``first..last`` exactly once: the whole ISO
    weeks inside it as week rows (by their Monday), the days before and after them as day rows."""
    start = first if first.weekday() == 0 else monday(first) + timedelta(days=7)
    end = monday(last + timedelta(days=1)) - timedelta(days=7)  # Monday of the last whole week
    if end < start:
        return [(Span.DAY, first, last)]
    parts: list[tuple[str, date, date]] = [(Span.WEEK, start, end)]
    if first < start:
        parts.append((Span.DAY, first, start - timedelta(days=1)))
    if end + timedelta(days=6) < last:
        parts.append((Span.DAY, end + timedelta(days=7), last))
    return parts


def in_window(rows: QuerySet[NamespaceCount], first: date, last: date) -> list[QuerySet[NamespaceCount]]:
    """``rows`` (scoped) cut into the window's parts, each one range of the unique index: read them as
    a ``UNION ALL`` (an ``OR`` of them would be a bitmap scan of the table's pages)."""
    return [
        rows.filter(span=span, measure__in=MEASURES, day__gte=low, day__lte=high)
        for span, low, high in window(first, last)
    ]


def add(cluster_id: int, namespace: str, day: date, delta: Tally) -> None:
    """Move the namespace's counts of ``day`` and of its week by ``delta`` (in the caller's
    transaction, under the namespace-day's row lock)."""
    counts = list(items(delta))
    if not counts:
        return
    rows = [
        (span, measure, at, cluster_id, namespace, parent, item, n)
        for span, at in ((Span.DAY, day), (Span.WEEK, monday(day)))
        for (measure, parent, item), n in counts
    ]
    _upsert(rows)
    # Counts that fell to zero go (equal figures store equal rows); naming the measures keeps each
    # side of the OR one narrow range of the unique index, not a walk of every day row.
    NamespaceCount.objects.filter(
        Q(span=Span.DAY, day=day) | Q(span=Span.WEEK, day=monday(day)),
        measure__in=MEASURES,
        cluster_id=cluster_id,
        namespace=namespace,
        count=0,
    ).delete()


_COLUMNS: Final = ("span", "measure", "day", "cluster_id", "namespace", "parent", "item", "count")


def _upsert(rows: list[tuple[Any, ...]]) -> None:
    """``count += n`` for each row's key, inserting the missing ones (PostgreSQL and SQLite alike)."""
    table = connection.ops.quote_name(NamespaceCount._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(c) for c in _COLUMNS)
    key = ", ".join(connection.ops.quote_name(c) for c in _COLUMNS[:-1])
    count = connection.ops.quote_name("count")
    if not connection.features.supports_covering_indexes:
        _add_one_by_one(rows, table, columns, count)
        return
    with connection.cursor() as cursor:
        for start in range(0, len(rows), BATCH):
            chunk = rows[start : start + BATCH]
            values = ", ".join(["(" + ", ".join(["%s"] * len(_COLUMNS)) + ")"] * len(chunk))
            cursor.execute(
                f"INSERT INTO {table} ({columns}) VALUES {values} ON CONFLICT ({key}) "
                f"DO UPDATE SET {count} = {table}.{count} + EXCLUDED.{count}",
                [value for row in chunk for value in row],
            )


def _add_one_by_one(rows: list[tuple[Any, ...]], table: str, columns: str, count: str) -> None:
    """``_upsert`` where the unique index does not exist: SQLite builds no index with ``INCLUDE``
    columns (Django leaves the constraint out), so ``ON CONFLICT`` has nothing to match. An UPDATE,
    and an INSERT when it found no row; the embedded SQLite has one writer at a time, so no other
    process can insert the same key in between."""
    where = " AND ".join(f"{connection.ops.quote_name(c)} = %s" for c in _COLUMNS[:-1])
    values = ", ".join(["%s"] * len(_COLUMNS))
    with connection.cursor() as cursor:
        for row in rows:
            cursor.execute(f"UPDATE {table} SET {count} = {count} + %s WHERE {where}", [row[-1], *row[:-1]])
            if cursor.rowcount == 0:
                cursor.execute(f"INSERT INTO {table} ({columns}) VALUES ({values})", list(row))


def rebuild(since: date, namespace_days: Iterable[Any] | None = None) -> int:
    """Every count from ``since`` on, from the namespace-days' maps; returns the rows written.

    ``namespace_days``: model instances (or ``values()`` dicts) to count from; default, the stored
    ones from ``since``. Day rows are replaced from ``since``; week rows from ``since``'s week, summed
    from the day rows (so that week's days before ``since`` count as stored).
    """
    if namespace_days is None:
        namespace_days = NamespaceDay.objects.filter(day__gte=since).iterator(chunk_size=BATCH)
    NamespaceCount.objects.filter(span=Span.DAY, day__gte=since).delete()
    day_rows = [
        NamespaceCount(
            span=Span.DAY,
            measure=measure,
            day=_get(row, "day"),
            cluster_id=_get(row, "cluster_id"),
            namespace=_get(row, "namespace"),
            parent=parent,
            item=item,
            count=n,
        )
        for row in namespace_days
        for (measure, parent, item), n in items(Tally.of_row(row))
    ]
    NamespaceCount.objects.bulk_create(day_rows, batch_size=BATCH)
    first_week = monday(since)
    NamespaceCount.objects.filter(span=Span.WEEK, day__gte=first_week).delete()
    weeks: Counter[tuple[Any, ...]] = Counter()
    stored = NamespaceCount.objects.filter(span=Span.DAY, day__gte=first_week).values_list(
        "measure", "day", "cluster_id", "namespace", "parent", "item", "count"
    )
    for measure, day, cluster_id, namespace, parent, item, n in stored.iterator(chunk_size=BATCH):
        weeks[(measure, monday(day), cluster_id, namespace, parent, item)] += n
    NamespaceCount.objects.bulk_create(
        [
            NamespaceCount(
                span=Span.WEEK,
                measure=measure,
                day=day,
                cluster_id=cluster_id,
                namespace=namespace,
                parent=parent,
                item=item,
                count=n,
            )
            for (measure, day, cluster_id, namespace, parent, item), n in weeks.items()
            if n
        ],
        batch_size=BATCH,
    )
    return len(day_rows) + len(weeks)


def _get(row: Any, name: str) -> Any:
    return row[name] if isinstance(row, dict) else getattr(row, name)

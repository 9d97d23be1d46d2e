"""Summing the namespace-day rows of a window into the fleet view's scopes: each namespace, each
cluster, the total.

On PostgreSQL the database does the summing (``_sql``): the numbers are typed columns of the
namespace-days, summed per namespace; the JSON maps (kinds, outcomes, strategies, sources and the
time-to-recovery histograms) are read from their narrow copy (``apps.fleet.counts``), the window's
whole weeks as weekly rows and its edge days as daily ones, and summed in one ``GROUP BY`` over
index-only scans, so Python sees only a row per namespace and key. Time to recovery is stored as
histograms (``apps.fleet.histogram``): the database sums their buckets per namespace, here per
cluster and in total, and the median and p90 come from the summed counts. Elsewhere (SQLite in a
local run) the namespace-day rows' JSON is read and summed here (``_python``).
Both give the same figures; ``tests/fleet/test_lost_by_hand.py`` runs both.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Final

from django.core.exceptions import EmptyResultSet
from django.db import connection, transaction
from django.db.models import QuerySet, Sum

from apps.fleet import histogram
from apps.fleet.counts import FLAT, NESTED, in_window
from apps.fleet.figures import FIELDS, NUMBER_FIELDS, Tally
from apps.fleet.models import NamespaceCount, NamespaceDay, Span

ScopeKey = tuple[Any, ...]  # () the total, (cluster_id,), (cluster_id, namespace)


@dataclass(frozen=True)
class Mttr:
    median: float
    p90: float
    samples: int


@dataclass
class Group:
    """One scope's sums over the window."""

    tally: Tally = field(default_factory=Tally)
    npu_s_scheduled: float = 0.0
    per_day: dict[date, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    mttr: dict[str, Mttr] = field(default_factory=dict)

    def merge(self, other: Group) -> None:
        self.tally.add(other.tally)
        self.npu_s_scheduled += other.npu_s_scheduled
        for day, kinds in other.per_day.items():  # empty from SQL: it sums the days per cluster itself
            self.per_day[day].update(kinds)


@dataclass
class Sums:
    total: Group
    clusters: dict[int, Group]
    namespaces: dict[tuple[int, str], Group]


def mttr_of(counts: Mapping[str, int] | Mapping[int, int]) -> Mttr:
    """Median and p90 of a time-to-recovery histogram (``apps.fleet.histogram``: its resolution)."""
    buckets = {int(k): int(n) for k, n in counts.items() if n}
    return Mttr(histogram.quantile(buckets, 0.5), histogram.quantile(buckets, 0.9), sum(buckets.values()))


def window_sums(
    rows: QuerySet[NamespaceDay],
    counts: QuerySet[NamespaceCount],
    first: date,
    last: date,
    *,
    use_sql: bool | None = None,
) -> Sums:
    """The scopes' sums of ``rows`` (a scoped, windowed queryset of namespace-days) and of ``counts``
    (the same scope's narrow counts, not windowed: ``first..last`` picks their weeks and days)."""
    if use_sql is None:
        use_sql = connection.vendor == "postgresql"
    if not use_sql:
        sums = _merged(_python(rows))
        _python_mttr(sums)
        return sums
    namespaces, histograms = _sql(rows, counts, first, last)
    sums = _merged(namespaces)
    for (scope, strategy), buckets in histograms.items():
        if buckets:
            _group_of(sums, scope).mttr[strategy] = mttr_of(buckets)
    # Faults per day are shown for the total and each cluster only: summed per cluster here.
    per_day = counts.filter(span=Span.DAY, measure="kind", day__gte=first, day__lte=last)
    for cluster_id, day, kind, count in _query(
        "SELECT cluster_id, day, item, SUM(count) FROM d GROUP BY 1, 2, 3 HAVING SUM(count) <> 0", [per_day]
    ):
        sums.clusters[cluster_id].per_day[day][kind] += int(count)
        sums.total.per_day[day][kind] += int(count)
    return sums


@contextmanager
def no_jit() -> Iterator[None]:
    """A transaction whose queries PostgreSQL runs without JIT compilation.

    It guesses millions of job-days for a 90-day ranking, so the plans
    look costly enough to compile, which takes ~1 s: a hundred times what running them takes.
    """
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL jit = off")
        yield


def _merged(namespaces: dict[tuple[int, str], Group]) -> Sums:
    """The clusters and the total as sums of their namespaces."""
    sums = Sums(Group(), {}, namespaces)
    for (cluster_id, _), group in namespaces.items():
        sums.clusters.setdefault(cluster_id, Group()).merge(group)
        sums.total.merge(group)
    return sums


def _group_of(sums: Sums, key: ScopeKey) -> Group:
    if not key:
        return sums.total
    if len(key) == 1:
        return sums.clusters.setdefault(key[0], Group())
    return sums.namespaces.setdefault((key[0], key[1]), Group())


# --- in Python ---------------------------------------------------------------------------------------
def _python(rows: QuerySet[NamespaceDay]) -> dict[tuple[int, str], Group]:
    namespaces: dict[tuple[int, str], Group] = {}
    for row in rows.values("cluster_id", "namespace", "day", "npu_s_scheduled", *FIELDS).iterator(2_000):
        group = namespaces.setdefault((row["cluster_id"], row["namespace"]), Group())
        group.tally.add_stored(row)
        group.npu_s_scheduled += row["npu_s_scheduled"]
        if row["by_kind"]:
            group.per_day[row["day"]].update(row["by_kind"])
    return namespaces


def _python_mttr(sums: Sums) -> None:
    for group in [sums.total, *sums.clusters.values(), *sums.namespaces.values()]:
        group.mttr = {
            strategy: mttr_of(counts) for strategy, counts in group.tally.mttr.items() if any(counts.values())
        }


# --- in PostgreSQL -----------------------------------------------------------------------------------
_COUNT_COLUMNS: Final = ("cluster_id", "namespace", "day", "measure", "parent", "item", "count")


def _query(sql: str, parts: list[QuerySet[NamespaceCount]]) -> list[tuple[Any, ...]]:
    """Run ``sql`` over ``d``: the rows of the querysets, one ``UNION ALL`` (each part one range of the
    counts' unique index, read index-only; their filters become the scans' own)."""
    selects, params = [], []
    for part in parts:
        try:
            inner, inner_params = part.values(*_COUNT_COLUMNS).query.sql_with_params()
        except EmptyResultSet:  # a scope that matches nothing (no grants)
            continue
        selects.append(f"({inner})")
        params.extend(inner_params)
    if not selects:
        return []
    with connection.cursor() as cursor:
        cursor.execute(f"WITH d AS ({' UNION ALL '.join(selects)}) {sql}", params)
        return list(cursor.fetchall())


def _sql(
    rows: QuerySet[NamespaceDay], counts: QuerySet[NamespaceCount], first: date, last: date
) -> tuple[dict[tuple[int, str], Group], dict[tuple[ScopeKey, str], Counter[int]]]:
    """The namespaces' sums, and the time-to-recovery histograms of every scope."""
    namespaces: dict[tuple[int, str], Group] = {}
    numbers = rows.values("cluster_id", "namespace").annotate(
        npu_s=Sum("npu_s_scheduled"), **{f"sum_{name}": Sum(name) for name in NUMBER_FIELDS}
    )
    for row in numbers:
        sums: dict[str, Any] = dict(row)
        group = namespaces.setdefault((sums["cluster_id"], sums["namespace"]), Group())
        group.npu_s_scheduled = sums["npu_s"] or 0.0
        for name in NUMBER_FIELDS:
            setattr(group.tally, name, sums[f"sum_{name}"] or 0)
    # Every map of every namespace in one pass over the window's weeks and edge days.
    summed = (
        "SELECT cluster_id, namespace, measure, parent, item, SUM(count) FROM d "
        "GROUP BY 1, 2, 3, 4, 5 HAVING SUM(count) <> 0"
    )
    histograms: dict[tuple[ScopeKey, str], Counter[int]] = defaultdict(Counter)
    for cluster_id, namespace, measure, parent, item, count in _query(summed, in_window(counts, first, last)):
        # a namespace with counts but no numbers row cannot be: both move in one transaction
        tally = namespaces.setdefault((cluster_id, namespace), Group()).tally
        if measure in FLAT:
            getattr(tally, FLAT[measure])[item] += int(count)
        elif measure == "mttr":
            # The histograms: summed per namespace by the database (a row per namespace, strategy
            # and bucket, however many recoveries), per cluster and in total here.
            for scope in ((cluster_id, namespace), (cluster_id,), ()):
                histograms[(scope, parent)][int(item)] += int(count)
        else:
            getattr(tally, NESTED[measure]).setdefault(parent, Counter())[item] += int(count)
    return namespaces, histograms

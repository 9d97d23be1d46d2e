"""Summing the namespace-day rows of a window into the fleet view's scopes: each namespace, each
cluster, the total.

On PostgreSQL the database does the summing (``_sql``): a handful of ``GROUP BY`` queries over the
rows' JSON counts (``jsonb_each``) and the time-to-recovery percentiles of every scope in one
``GROUPING SETS`` query, so 100,000 jobs x 90 days cost the same few queries as one namespace, and
Python sees only a row per namespace and key. Time to recovery is stored as histograms
(``apps.fleet.histogram``): the database sums their buckets per scope, and the median and p90 come from
the summed counts. Elsewhere (SQLite in a local run) the rows are read and summed here (``_python``).
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
from apps.fleet.figures import FIELDS, NUMBER_FIELDS, Tally
from apps.fleet.models import NamespaceDay

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


def window_sums(rows: QuerySet[NamespaceDay], *, use_sql: bool | None = None) -> Sums:
    """The scopes' sums of ``rows`` (a scoped, windowed queryset of namespace-days)."""
    if use_sql is None:
        use_sql = connection.vendor == "postgresql"
    if not use_sql:
        sums = _merged(_python(rows))
        _python_mttr(sums)
        return sums
    sums = _merged(_sql(rows))
    # Faults per day are shown for the total and each cluster only: summed per cluster here.
    per_day = (
        "SELECT d.cluster_id, d.day, e.key, SUM(e.value::numeric) FROM d "
        "CROSS JOIN LATERAL jsonb_each_text(d.by_kind) e GROUP BY 1, 2, 3"
    )
    for cluster_id, day, kind, count in _query(per_day, rows):
        sums.clusters[cluster_id].per_day[day][kind] += int(count)
        sums.total.per_day[day][kind] += int(count)
    for key, strategy, stat in _sql_mttr(rows):
        _group_of(sums, key).mttr[strategy] = stat
    return sums


@contextmanager
def no_jit() -> Iterator[None]:
    """A transaction whose queries PostgreSQL runs without JIT compilation.

    It guesses 100 rows per ``jsonb_each`` and millions of job-days for a 90-day ranking, so the plans
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
_CTE_COLUMNS: Final = (
    "cluster_id",
    "namespace",
    "day",
    "by_kind",
    "recoveries",
    "by_strategy",
    "sources",
    "mttr",
)


def _query(sql: str, rows: QuerySet[NamespaceDay]) -> list[tuple[Any, ...]]:
    """Run ``sql`` over ``d``: the rows of the queryset (its filters become the scan's own)."""
    try:
        inner, params = rows.values(*_CTE_COLUMNS).query.sql_with_params()
    except EmptyResultSet:  # a scope that matches nothing (no grants): nothing to ask the database
        return []
    with connection.cursor() as cursor:
        cursor.execute(f"WITH d AS ({inner}) {sql}", params)
        return list(cursor.fetchall())


def _sql(rows: QuerySet[NamespaceDay]) -> dict[tuple[int, str], Group]:
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
    for column in ("by_kind", "recoveries"):
        flat = (
            "SELECT d.cluster_id, d.namespace, e.key, SUM(e.value::numeric) FROM d "
            f"CROSS JOIN LATERAL jsonb_each_text(d.{column}) e GROUP BY 1, 2, 3"
        )
        for cluster_id, namespace, key, count in _query(flat, rows):
            getattr(namespaces[(cluster_id, namespace)].tally, column)[key] += int(count)
    for column in ("by_strategy", "sources"):
        nested = (
            "SELECT d.cluster_id, d.namespace, a.key, b.key, SUM(b.value::numeric) FROM d "
            f"CROSS JOIN LATERAL jsonb_each(d.{column}) a CROSS JOIN LATERAL jsonb_each_text(a.value) b "
            "GROUP BY 1, 2, 3, 4"
        )
        for cluster_id, namespace, outer, inner_key, count in _query(nested, rows):
            mapping = getattr(namespaces[(cluster_id, namespace)].tally, column)
            mapping.setdefault(outer, Counter())[inner_key] += int(count)
    return namespaces


def _sql_mttr(rows: QuerySet[NamespaceDay]) -> list[tuple[ScopeKey, str, Mttr]]:
    """The histograms summed per namespace by the database (a row per namespace, strategy and bucket:
    a few dozen buckets each, however many recoveries), then per cluster and in total here, and each
    one's quantiles."""
    sql = (
        "SELECT d.cluster_id, d.namespace, a.key, b.key, SUM(b.value::int) FROM d "
        "CROSS JOIN LATERAL jsonb_each(d.mttr) a CROSS JOIN LATERAL jsonb_each_text(a.value) b "
        "GROUP BY 1, 2, 3, 4"
    )
    histograms: dict[tuple[ScopeKey, str], Counter[int]] = defaultdict(Counter)
    for cluster_id, namespace, strategy, key, count in _query(sql, rows):
        for scope in ((cluster_id, namespace), (cluster_id,), ()):
            histograms[(scope, strategy)][int(key)] += int(count)
    return [(scope, strategy, mttr_of(counts)) for (scope, strategy), counts in histograms.items() if counts]

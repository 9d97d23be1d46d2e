"""A page of the jobs list rendered to JSON by PostgreSQL, with the list's count, in one statement.

Rendering a page in Python read every row's columns into objects (two timestamps, a JSON column and
a float per row) and wrote them out again: for a 50-row page that was most of the request's CPU
(bench/profile_api.py, stop 38: 2.0 ms reading and 0.6 ms shaping of 4.5 ms). PostgreSQL writes each
row as the JSON object ``job_row_output`` would make of it, and the count of the whole list comes in
the same statement, so a page is one round trip and no per-row Python.

The SQL says exactly what the serializer says (tests/api/test_job_output.py compares the two for
every kind of row): timestamps in UTC as DRF's ISO 8601 ("Z", microseconds only when there are
any), the strategies column as a list, replicas as stored (``{}`` when empty), ``could_save`` as
stored, which is already rounded to the hundredth (apps/advice/services.py ``summary_store``).
Other databases, and a request in another time zone, take the Python path.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db.models import F, Func, QuerySet, TextField
from django.db.models.expressions import RawSQL

from apps.api.jobs.serializers import DATETIME_FIELDS, JobListOutputSerializer, list_column_of
from apps.core.compiled import AroundSubquery
from apps.core.sql_json import IsoUtc, JsonObject
from apps.jobs.models import LiveJobCount, TrainingJob


class _CommaList(Func):
    """The comma-joined strategies column as a JSON list (``strategies_of``: "" is [])."""

    output_field = TextField()
    template = (
        "CASE WHEN %(expressions)s = '' THEN '[]'::json"
        " ELSE to_json(string_to_array(%(expressions)s, ',')) END"
    )


class _JsonOrEmpty(Func):
    output_field = TextField()
    template = "COALESCE(%(expressions)s, '{}'::jsonb)"


def _value_of(name: str) -> Any:
    column = F(list_column_of(name))
    if name in DATETIME_FIELDS:
        return IsoUtc(column)
    if name == "strategies":
        return _CommaList(column)
    if name == "replicas":
        return _JsonOrEmpty(column)
    return column


# A list row: the serializer's fields are the keys, in its order.
_ROW = JsonObject({name: _value_of(name) for name in JobListOutputSerializer.Meta.fields})


# How the count's subquery is totalled: the visible jobs counted, or the live-job counts of the
# visible namespaces summed (a list with no filter: apps/jobs/models.py LiveJobCount).
_COUNTED = "SELECT COUNT(*) FROM ({whole}) AS counted"
_SUMMED = "SELECT COALESCE(SUM(live), 0)::bigint FROM ({whole}) AS counted"


def _page_of(
    shape: tuple[tuple[Any, ...], str], ids: Any, whole: tuple[str, Any]
) -> QuerySet[TrainingJob, tuple[str, int]]:
    order, total = shape
    whole_sql, whole_params = whole
    # An uncorrelated subquery: PostgreSQL computes it once per statement, not per row.
    counted = RawSQL(total.format(whole=whole_sql), whole_params)
    return (
        TrainingJob.objects.filter(pk__in=ids)
        .order_by(*order)
        .annotate(list_row=_ROW, list_total=counted)
        .values_list("list_row", "list_total")
    )


# Compiled once per order and count (apps/core/compiled.py); the page's ids and the count's subquery
# every time.
_PAGE: AroundSubquery[tuple[str, int]] = AroundSubquery(_page_of, whole=True)


def json_page(
    queryset: QuerySet[TrainingJob], order: tuple[Any, ...], *, limit: int, offset: int
) -> tuple[int, list[str]]:
    """The count of ``queryset`` and its rows ``offset`` to ``offset + limit`` as JSON texts, in
    ``order`` (a filtered list: its jobs counted). A page past the end has no row to carry the
    count: it is counted on its own."""
    whole = queryset.order_by().values("pk")
    try:
        rows = _PAGE(
            (order, _COUNTED), queryset.values("pk"), window=slice(offset, offset + limit), whole=whole
        )
    except EmptyResultSet:  # a filter that matches nothing by construction (a user with no grant)
        return 0, []
    if not rows:
        return queryset.count(), []
    return rows[0][1], [row for row, _ in rows]


def unfiltered_json_page(
    visibility: Hashable,
    build: Callable[[], tuple[QuerySet[TrainingJob], QuerySet[LiveJobCount]]],
    order: tuple[Any, ...],
    *,
    limit: int,
    offset: int,
) -> tuple[int, list[str]]:
    """``json_page`` of the list with no filter: the visible live jobs, counted by their namespaces'
    live-job counts. ``build()`` gives both querysets; they are built and compiled once per
    ``(order, visibility)`` in this process (``AroundSubquery.keyed``), so ``visibility`` must decide
    them: ``apps.accounts.selectors.visibility_key`` of the user whose jobs ``build`` selects."""

    def subqueries() -> tuple[QuerySet[Any, Any], QuerySet[Any, Any]]:
        queryset, live_counts = build()
        return queryset.values("pk"), live_counts.values("live")

    try:
        rows = _PAGE.keyed((order, _SUMMED), visibility, subqueries, window=slice(offset, offset + limit))
    except EmptyResultSet:  # a user with no grant
        return 0, []
    if not rows:
        return build()[0].count(), []
    return rows[0][1], [row for row, _ in rows]

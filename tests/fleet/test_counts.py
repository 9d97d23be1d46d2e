"""The narrow counts (``apps.fleet.counts``): weeks plus edge days are the days' sum, kept as incidents
close exactly as a rebuild makes them, and the same maps as the namespace-days' JSON."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import pytest

from apps.fleet import counts, summaries
from apps.fleet.figures import Tally
from apps.fleet.models import NamespaceCount, NamespaceDay, Span
from tests.support.fleet import Fleet, retry_incident
from tests.support.world import training_job

pytestmark = pytest.mark.django_db


def test_a_window_is_its_whole_weeks_and_edge_days_each_day_once() -> None:
    monday = date(2026, 11, 2)
    for offset in range(14):
        first = monday + timedelta(days=offset)
        for length in range(1, 40):
            last = first + timedelta(days=length - 1)
            covered: Counter[date] = Counter()
            for span, low, high in counts.window(first, last):
                if span == Span.WEEK:
                    assert low.weekday() == 0 and high.weekday() == 0
                    end = high + timedelta(days=6)
                else:
                    end = high
                covered.update(low + timedelta(days=i) for i in range((end - low).days + 1))
            assert covered == Counter(first + timedelta(days=i) for i in range(length)), (first, last)


def _history(fleet: Fleet) -> None:
    """A job with faults on 17 days across three weeks' boundaries, one to three a day."""
    job = training_job(fleet.east, "opt", "team-c")
    midnight = datetime.combine(fleet.faults_at.date(), time.min, tzinfo=UTC)
    for back in range(24, 3, -1):
        if back % 5 == 0:
            continue  # some days without faults
        for n in range(1 + back % 3):
            retry_incident(job, midnight - timedelta(days=back, hours=-(n * 3 + 1)), f"80C9800{n}")


def _rows(span: str) -> Counter[tuple[Any, ...]]:
    stored = NamespaceCount.objects.filter(span=span).values_list(
        "measure", "day", "cluster_id", "namespace", "parent", "item", "count"
    )
    return Counter({row[:-1]: row[-1] for row in stored})


def test_week_rows_are_the_sum_of_their_days(fleet: Fleet) -> None:
    _history(fleet)
    days = _rows(Span.DAY)
    weeks: Counter[tuple[Any, ...]] = Counter()
    for (measure, day, *rest), n in days.items():
        weeks[(measure, counts.monday(day), *rest)] += n
    assert _rows(Span.WEEK) == weeks
    assert len(weeks) > 10


def test_day_rows_mirror_the_namespace_days(fleet: Fleet) -> None:
    _history(fleet)
    expected: Counter[tuple[Any, ...]] = Counter()
    for row in NamespaceDay.objects.all():
        for (measure, parent, item), n in counts.items(Tally.of_row(row)):
            expected[(measure, row.day, row.cluster_id, row.namespace, parent, item)] = n
    assert _rows(Span.DAY) == expected


def test_any_window_sums_weeks_and_edges_to_the_daily_sum(fleet: Fleet) -> None:
    _history(fleet)
    today = fleet.faults_at.date() + timedelta(days=1)
    everything = NamespaceCount.objects.all()
    columns = ("cluster_id", "namespace", "measure", "parent", "item", "count")
    for length in (1, 6, 7, 8, 13, 14, 20, 28):
        for end_back in range(0, 8):
            last = today - timedelta(days=end_back)
            first = last - timedelta(days=length - 1)
            from_parts: Counter[tuple[Any, ...]] = Counter()
            for part in counts.in_window(everything, first, last):
                for *key, n in part.values_list(*columns):
                    from_parts[tuple(key)] += n
            daily: Counter[tuple[Any, ...]] = Counter()
            rows = everything.filter(span=Span.DAY, day__gte=first, day__lte=last)
            for *key, n in rows.values_list(*columns):
                daily[tuple(key)] += n
            assert +from_parts == +daily, (first, last)


def test_kept_counts_are_what_a_rebuild_makes(fleet: Fleet) -> None:
    _history(fleet)
    kept = (_rows(Span.DAY), _rows(Span.WEEK))
    summaries.rebuild(since=fleet.faults_at.date() - timedelta(days=30))
    assert (_rows(Span.DAY), _rows(Span.WEEK)) == kept
    # from the middle of a week: its earlier days' counts stay in the week row
    summaries.rebuild(since=fleet.faults_at.date() - timedelta(days=10))
    assert (_rows(Span.DAY), _rows(Span.WEEK)) == kept

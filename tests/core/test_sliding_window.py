"""The throttles' counter (``apps/core/cache.py``): a sliding window over two fixed ones, so a budget
spent just before a window boundary still counts just after it (a fixed window would hand out a
fresh budget there), and a refused hit is not counted."""

from __future__ import annotations

import uuid

import pytest

from apps.core.cache import sliding_window_hit, sliding_window_hits


@pytest.mark.usefixtures("db")
def test_the_budget_slides_across_a_window_boundary() -> None:
    key = f"test-window-{uuid.uuid4()}"
    start = 1_800_000_000  # a multiple of 60: a window starts here
    assert [sliding_window_hit(key, 60, 5, start + 59.0) for _ in range(3)] == [True] * 3
    # Two seconds later, in the next window: 3 x 58/60 of the last one still counts, so 2 more, not 5.
    assert [sliding_window_hit(key, 60, 5, start + 61.0) for _ in range(3)] == [True, True, False]
    # The refused one was taken back: half a window on, 3 x 0.5 + 2 = 3.5 -> one more (4.5), then no.
    assert [sliding_window_hit(key, 60, 5, start + 90.0) for _ in range(2)] == [True, False]


@pytest.mark.usefixtures("db")
def test_buckets_in_one_round_trip_are_decided_each_on_its_own() -> None:
    small, large = f"test-window-{uuid.uuid4()}", f"test-window-{uuid.uuid4()}"
    start = 1_800_000_000
    buckets = [(small, 60, 2), (large, 60, 10)]
    # The small bucket refuses the third hit; the large one counts it all the same (DRF checks every
    # throttle), and the refused hit is taken back from the small one only.
    verdicts = [sliding_window_hits(buckets, start + 1.0) for _ in range(3)]
    assert verdicts == [[True, True], [True, True], [False, True]]
    assert sliding_window_hit(small, 60, 3, start + 2.0) is True  # 2 counted, not 3
    assert sliding_window_hit(large, 60, 3, start + 2.0) is False  # 3 counted

"""Time to recovery as histograms (``apps.fleet.histogram``): the quantiles' semantics and resolution."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from apps.fleet import histogram as h
from apps.fleet.aggregate import mttr_of
from apps.fleet.figures import Tally


def _percentile_cont(values: list[float], q: float) -> float:
    """PostgreSQL's ``percentile_cont`` over the raw values, for comparison."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def test_buckets_by_hand() -> None:
    # 16 buckets per doubling: bucket 1 + floor(16 x log2 s); under 1 s is bucket 0.
    assert [h.bucket(s) for s in (0, 0.99, 1, 2, 64, 65, 66.9, 212)] == [0, 0, 1, 17, 97, 97, 98, 124]
    assert h.bounds(97) == (64.0, pytest.approx(66.8335, abs=1e-4))
    assert h.representative(97) == pytest.approx(2 ** (96.5 / 16))
    assert h.representative(0) == 0.5


def test_quantiles_interpolate_between_ranks_like_percentile_cont() -> None:
    """10 s and 20 s: shown as 10.152 and 20.305 (their buckets' middles); the median halfway between
    them, the p90 nine tenths of the way: 10.152 + 0.9 x (20.305 - 10.152) = 19.290."""
    counts = {h.bucket(10): 1, h.bucket(20): 1}
    assert (h.representative(h.bucket(10)), h.representative(h.bucket(20))) == (
        pytest.approx(10.152, abs=1e-3),
        pytest.approx(20.305, abs=1e-3),
    )
    assert h.quantile(counts, 0.5) == pytest.approx(15.229, abs=1e-3)
    assert h.quantile(counts, 0.9) == pytest.approx(19.290, abs=1e-3)
    # Three samples in one bucket and one in another: ranks 0-2 are 65.401, rank 3 is 210.657.
    many = {h.bucket(65): 3, h.bucket(212): 1}
    assert h.quantile(many, 0.5) == pytest.approx(65.401, abs=1e-3)  # position 1.5: both 65.401
    assert h.quantile(many, 0.9) == pytest.approx(65.401 + 0.7 * (210.657 - 65.401), abs=1e-3)
    with pytest.raises(ValueError):
        h.quantile({}, 0.5)


def test_quantiles_stay_within_the_stated_resolution_of_the_raw_ones() -> None:
    rng = random.Random(7)
    for _ in range(200):
        values = [rng.lognormvariate(4, 1.2) + 1 for _ in range(rng.randint(1, 60))]
        counts: dict[int, int] = {}
        for value in values:
            counts[h.bucket(value)] = counts.get(h.bucket(value), 0) + 1
        for q in (0.5, 0.9):
            assert h.quantile(counts, q) == pytest.approx(
                _percentile_cont(values, q), rel=h.RELATIVE_RESOLUTION, abs=1e-3
            )


def test_histograms_add_and_subtract_exactly() -> None:
    def tally(seconds: list[float]) -> Tally:
        t = Tally()
        for s in seconds:
            t.mttr.setdefault("retry", Counter())[str(h.bucket(s))] += 1
        return t

    day = tally([10, 20, 20])
    late = tally([10])
    summed = Tally()
    summed.add(day)
    summed.add(late)
    assert mttr_of(summed.mttr["retry"]).samples == 4
    summed.add(late, -1)
    assert summed.fields()["mttr"] == day.fields()["mttr"] == {"retry": {"54": 1, "70": 2}}
    summed.add(day, -1)
    assert summed.fields()["mttr"] == {}

"""Time to recovery as a fixed-bucket histogram, so a window's median and p90 come from summed counts.

The summaries store, per strategy, how many recoveries fell in each bucket (``{bucket: count}``), not
the durations: a namespace-day's histogram has at most a few dozen keys however many jobs recovered,
counts add and subtract exactly (a recounted job-day takes its old counts back out), and the fleet
view sums buckets instead of sorting every sample of the window.

Buckets are logarithmic: ``BUCKETS_PER_DOUBLING`` per factor of two, so bucket ``k >= 1`` holds the
durations in ``[2^((k-1)/16), 2^(k/16))`` seconds (each ~4.4 % wide) and bucket 0 those under 1 s.
A duration is represented by its bucket's geometric middle (``representative``), at most 2.2 % from
the true value (``RELATIVE_RESOLUTION``); under 1 s by 0.5 s. The quantiles are PostgreSQL's
``percentile_cont`` (linear interpolation between the closest ranks) of the samples so represented:
exactly what ``percentile_cont`` over the raw durations gives, to within that resolution.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

BUCKETS_PER_DOUBLING: Final = 16
RELATIVE_RESOLUTION: Final = 2 ** (1 / (2 * BUCKETS_PER_DOUBLING)) - 1  # 0.0219: half a bucket, relative


def bucket(seconds: float) -> int:
    """The bucket a duration counts in (negative durations, a clock's step back, count as 0 s)."""
    if seconds < 1:
        return 0
    return 1 + math.floor(BUCKETS_PER_DOUBLING * math.log2(seconds))


def bounds(key: int) -> tuple[float, float]:
    """``[low, high)`` seconds of bucket ``key``."""
    if key <= 0:
        return 0.0, 1.0
    return 2 ** ((key - 1) / BUCKETS_PER_DOUBLING), 2 ** (key / BUCKETS_PER_DOUBLING)


def representative(key: int) -> float:
    """The value a bucket's samples take: its geometric middle (0.5 s for bucket 0)."""
    if key <= 0:
        return 0.5
    return 2 ** ((key - 0.5) / BUCKETS_PER_DOUBLING)


def quantile(counts: Mapping[int, int], q: float) -> float:
    """``percentile_cont(q)`` of the samples ``counts`` holds ({bucket: samples}, all counts > 0)."""
    ordered = sorted((k, n) for k, n in counts.items() if n > 0)
    total = sum(n for _, n in ordered)
    if total == 0:
        raise ValueError("no samples")
    position = q * (total - 1)
    low_rank = math.floor(position)
    low, high = _at_rank(ordered, low_rank), _at_rank(ordered, min(low_rank + 1, total - 1))
    return round(low + (high - low) * (position - low_rank), 3)


def _at_rank(ordered: list[tuple[int, int]], rank: int) -> float:
    """The value of the ``rank``-th sample (0-based) in ascending order."""
    seen = 0
    for key, count in ordered:
        seen += count
        if rank < seen:
            return representative(key)
    return representative(ordered[-1][0])

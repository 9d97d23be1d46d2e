"""The product's one retry-delay formula: capped exponential with jitter.

Every retry loop (the watch loop, the policy push, webhook deliveries, recreate, supervised threads)
draws its waits here, so they all spread the same way: the ``attempt``-th delay is
``d = min(maximum, initial * 2**attempt)``, drawn uniformly from ``[(1 - jitter) * d, d]``. Never
longer than the cap; ``jitter`` 1.0 is "full jitter" (0..d), 0.5 keeps at least half of ``d``, so
many clients failing together do not retry together.
"""

from __future__ import annotations

import random

# 2**60 already exceeds any cap in seconds; bounding the exponent keeps the float finite.
_MAX_EXPONENT = 60


def jittered_delay(
    attempt: int,
    *,
    initial: float,
    maximum: float,
    jitter: float = 0.5,
    rng: random.Random | None = None,
) -> float:
    """The wait before retry ``attempt`` (0 = the first retry), in seconds."""
    if not 0.0 <= jitter <= 1.0:
        raise ValueError("jitter must be between 0 and 1")
    ceiling = max(maximum, initial)
    nominal = min(ceiling, initial * (2 ** min(max(attempt, 0), _MAX_EXPONENT)))
    draw = (rng or random).uniform(1.0 - jitter, 1.0)
    return nominal * draw


class Backoff:
    """Stateful :func:`jittered_delay`: ``next_delay()`` counts the attempts, ``reset()`` starts over."""

    def __init__(
        self,
        initial: float = 0.5,
        maximum: float = 30.0,
        jitter: float = 0.5,
        rng: random.Random | None = None,
    ) -> None:
        self.initial = initial
        self.maximum = max(maximum, initial)
        self.jitter = jitter
        self._rng = rng or random.Random()
        self.attempt = 0

    def reset(self) -> None:
        self.attempt = 0

    def next_delay(self, retry_after: float | None = None) -> float:
        """The next wait; the server's ``Retry-After`` (capped) takes precedence when it sent one."""
        attempt = self.attempt
        self.attempt += 1
        if retry_after is not None and retry_after > 0:
            return min(retry_after, self.maximum)
        return jittered_delay(
            attempt, initial=self.initial, maximum=self.maximum, jitter=self.jitter, rng=self._rng
        )

"""``SimClock``: simulated time runs ``speed`` times faster, and the speed may change while it runs
(the shared cluster of a test run slows down for one test) without time jumping or going back."""

from __future__ import annotations

import time

import pytest

from simcluster.clock import SimClock


def test_simulated_seconds_pass_speed_times_faster() -> None:
    clock = SimClock(100)
    start = clock.monotonic()
    time.sleep(0.05)
    assert 4.5 <= clock.monotonic() - start <= 50  # 0.05 s real, at least 5 simulated (load: more)
    assert clock.real_seconds(300) == 3.0


def test_changing_the_speed_keeps_time_continuous_and_monotonic() -> None:
    clock = SimClock(1000)
    time.sleep(0.02)
    before = clock.monotonic()
    clock.set_speed(1)
    after = clock.monotonic()
    assert before <= after < before + 1  # no jump: at 1x a moment adds well under a second
    assert clock.speed == 1.0 and clock.real_seconds(2) == 2.0
    readings = [clock.monotonic() for _ in range(1000)]
    assert readings == sorted(readings)
    clock.set_speed(1000)
    time.sleep(0.02)
    assert clock.monotonic() - after >= 15  # fast again: 0.02 s real is at least 20 simulated


def test_a_speed_must_be_positive() -> None:
    with pytest.raises(ValueError, match="> 0"):
        SimClock(0)
    with pytest.raises(ValueError, match="> 0"):
        SimClock(1).set_speed(-1)

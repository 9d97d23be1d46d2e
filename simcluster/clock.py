"""Simulated time: every MindCluster timeout and phase duration runs ``speed`` times faster.

``SimClock(1000)`` turns ClusterD's 300 s platform wait into 0.3 s of wall time, so tests can walk
through the real timeouts instead of special-casing them.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta


class SimClock:
    """A clock whose simulated seconds pass ``speed`` times faster than real ones.

    The speed may change while the clock runs (``set_speed``): simulated time stays continuous and
    never goes back, it only passes faster or slower from then on.
    """

    def __init__(self, speed: float = 1.0) -> None:
        _check_speed(speed)
        # (real monotonic time, simulated seconds at it, speed): one tuple, replaced whole, so a reader
        # in another thread never mixes an old base with a new speed.
        self._base = (time.monotonic(), 0.0, float(speed))
        self._lock = threading.Lock()
        self._wall_start = datetime.now(UTC)

    @property
    def speed(self) -> float:
        return self._base[2]

    def set_speed(self, speed: float) -> None:
        """Run ``speed`` times faster than real time from now on (a sleep already begun keeps its
        length in real seconds)."""
        _check_speed(speed)
        with self._lock:
            real = time.monotonic()
            self._base = (real, self._at(real), float(speed))

    def real_seconds(self, sim_seconds: float) -> float:
        """Wall-clock seconds that ``sim_seconds`` of simulated time take."""
        return max(0.0, sim_seconds) / self.speed

    def monotonic(self) -> float:
        """Simulated seconds since the clock was created."""
        return self._at(time.monotonic())

    def _at(self, real: float) -> float:
        real_base, sim_base, speed = self._base
        return sim_base + max(0.0, real - real_base) * speed

    def now(self) -> datetime:
        """Simulated wall time (UTC): real start time plus the simulated elapsed seconds."""
        return self._wall_start + timedelta(seconds=self.monotonic())

    def sleep(self, sim_seconds: float, stop: threading.Event | None = None) -> bool:
        """Sleep ``sim_seconds`` of simulated time; returns False early if ``stop`` gets set."""
        real = self.real_seconds(sim_seconds)
        if stop is None:
            time.sleep(real)
            return True
        return not stop.wait(real)

    def deadline(self, sim_seconds: float) -> float:
        """The ``monotonic()`` value ``sim_seconds`` from now."""
        return self.monotonic() + sim_seconds


def _check_speed(speed: float) -> None:
    if not speed > 0:
        raise ValueError(f"clock speed must be > 0, got {speed!r}")

"""Simulated time: every MindCluster timeout and phase duration runs ``speed`` times faster.

``SimClock(1000)`` turns ClusterD's 300 s platform wait into 0.3 s of wall time, so tests can walk
through the real timeouts instead of special-casing them.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta


class SimClock:
    """A clock whose simulated seconds pass ``speed`` times faster than real ones."""

    def __init__(self, speed: float = 1.0) -> None:
        if not speed > 0:
            raise ValueError(f"clock speed must be > 0, got {speed!r}")
        self.speed = float(speed)
        self._real_start = time.monotonic()
        self._wall_start = datetime.now(UTC)

    def real_seconds(self, sim_seconds: float) -> float:
        """Wall-clock seconds that ``sim_seconds`` of simulated time take."""
        return max(0.0, sim_seconds) / self.speed

    def monotonic(self) -> float:
        """Simulated seconds since the clock was created."""
        return (time.monotonic() - self._real_start) * self.speed

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

"""A heartbeat file per long-running process, and the exec probe that checks its age.

The worker, beat, ingester and decider serve no HTTP. ``celery inspect ping`` as a probe costs a
Python start, a broker round trip and a reply from every worker (seconds each period); instead each
process touches ``<tmp>/recovery-<name>.heartbeat`` from the loop that does its work, and the probe
``python -m apps.core.heartbeat check <name> --max-age S`` only compares the file's mtime with the
clock: no Django, no network, about 30 ms. ``<tmp>`` is ``tempfile.gettempdir()`` (``$TMPDIR`` or
``/tmp``): in the pod, the ``emptyDir`` mounted at ``/tmp`` (the root filesystem is read-only).

This module imports nothing from Django so the probe starts fast.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

# How often a process touches its file; the probes allow several missed beats (--max-age).
BEAT_SECONDS = 10.0


def heartbeat_path(name: str) -> Path:
    return Path(tempfile.gettempdir()) / f"recovery-{name}.heartbeat"


class Heartbeat:
    """Touches the named heartbeat file, at most every ``every`` seconds however often ``beat`` is called."""

    def __init__(self, name: str, every: float = BEAT_SECONDS) -> None:
        self.path = heartbeat_path(name)
        self.every = every
        self._last = float("-inf")

    def beat(self) -> None:
        now = time.monotonic()
        if now - self._last < self.every:
            return
        self._last = now
        try:
            self.path.touch()
            os.utime(self.path)
        except OSError:  # a full or missing /tmp fails the probe, which is the point; never the process
            pass

    def run_in_thread(self, stop: threading.Event) -> threading.Thread:
        """Beat from a daemon thread until ``stop``: for a process whose work loop cannot call ``beat``."""

        def loop() -> None:
            while True:
                self.beat()
                if stop.wait(self.every):
                    return

        thread = threading.Thread(target=loop, name=f"heartbeat-{self.path.stem}", daemon=True)
        thread.start()
        return thread


def heartbeat_age(name: str) -> float | None:
    """Seconds since the named process last beat, or None if it never did."""
    try:
        return max(0.0, time.time() - heartbeat_path(name).stat().st_mtime)
    except FileNotFoundError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m apps.core.heartbeat")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="exit 0 if the process beat within --max-age seconds")
    check.add_argument("name")
    check.add_argument("--max-age", type=float, default=60.0)
    args = parser.parse_args(argv)
    age = heartbeat_age(args.name)
    if age is None:
        print(f"{heartbeat_path(args.name)}: no heartbeat yet", file=sys.stderr)
        return 1
    if age > args.max_age:
        print(
            f"{heartbeat_path(args.name)}: last beat {age:.0f}s ago (> {args.max_age:.0f}s)", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

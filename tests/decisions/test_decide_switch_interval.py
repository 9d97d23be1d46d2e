"""The decide processes run with a short GIL switch interval, so the PodGroup watch keeps up.

Each decide process reads its watch on one thread next to 8 lanes doing ORM work. With CPython's
default 5 ms interval the watch, which gets the GIL back once per TLS record it reads, fell seconds
behind while the lanes answered a burst of questions (bench/bench_decisions.py: the next questions
waited in the socket's Recv-Q). The command sets the interval before it forks its shard processes.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest
from django.core.management import call_command

from apps.decisions.management.commands import decide


@pytest.mark.django_db  # the command checks --cluster names against the stored clusters
def test_the_watchers_run_with_the_short_switch_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[float] = []

    def record(stop: threading.Event, **_: Any) -> None:
        seen.append(sys.getswitchinterval())

    monkeypatch.setattr(decide, "run_decision_watchers", record)
    monkeypatch.delenv("METRICS_PORT", raising=False)
    monkeypatch.setattr(decide, "cluster_register_default", lambda: None)
    before = sys.getswitchinterval()
    try:
        call_command("decide", "--processes", "1")
    finally:
        sys.setswitchinterval(before)  # the test process keeps its own
    assert seen == [decide.SWITCH_INTERVAL_S]
    assert decide.SWITCH_INTERVAL_S < 0.005  # shorter than CPython's default

"""Supervised long-lived threads: a crash is caught, logged, counted and restarted (issue #24 item 6).

Every long-lived thread of the product processes (the ingester's leader, watchers, applier and
ClusterD follower; the decider's PodGroup watchers; the broadcast sender) runs its target under a
:class:`Supervisor`. Any ``Exception`` from the target (a database outage, an ``IntegrityError``
when two processes overlap, a bug) is caught: the thread's database connection is discarded (it
may be the broken one), the error is recorded, and the target runs again after the shared
jittered backoff (``apps.cluster.backoff``), or, for a thread whose restart must be coordinated
with others (the ingester's term threads), ``on_crash`` is called instead and the owner restarts it.

The state of every supervised thread, by name, is what ``supervised_threads_status()`` returns;
``supervised_threads_ready()`` is False while one is dead or crash-looping; the Prometheus
collector here publishes the same (``controlplane_supervised_thread_*``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import connection
from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from apps.cluster.backoff import Backoff
from apps.core import metrics

log = logging.getLogger(__name__)

RUNNING = "running"
BACKING_OFF = "backing_off"  # crashed; waiting for its restart
CRASHED = "crashed"  # crashed; its owner restarts it (``on_crash``)
DEAD = "dead"  # ended by something the supervisor cannot catch (``BaseException``)
STOPPED = "stopped"  # ended because it was told to stop, or its target returned


@dataclass
class ThreadStatus:
    name: str
    state: str = RUNNING
    restarts: int = 0
    failures_in_a_row: int = 0
    last_error: str = ""
    last_error_at: float | None = None  # wall clock, for people
    started_at: float = 0.0  # monotonic: when the current run began
    thread: threading.Thread | None = None
    stop: threading.Event | None = None  # the current supervisor's

    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive() and self.state in (RUNNING, BACKING_OFF)

    def crash_looping(self) -> bool:
        """Failed ``SUPERVISOR_CRASH_LOOP_FAILURES`` times in a row, the current run not yet proven."""
        proven = time.monotonic() - self.started_at >= settings.SUPERVISOR_HEALTHY_AFTER_SECONDS
        return self.failures_in_a_row >= settings.SUPERVISOR_CRASH_LOOP_FAILURES and not (
            self.state == RUNNING and proven
        )

    def healthy(self) -> bool:
        if self.state == STOPPED:
            return True
        if self.state == CRASHED and self.stop is not None and self.stop.is_set():
            # Handed to its owner, whose restart is on its way (or who is shutting down).
            return not self.crash_looping()
        return self.alive() and not self.crash_looping()

    def as_dict(self) -> dict[str, Any]:
        return {
            "alive": self.alive(),
            "state": self.state,
            "restarts": self.restarts,
            "failures_in_a_row": self.failures_in_a_row,
            "crash_loop": self.crash_looping(),
            "last_error": self.last_error,
            "last_error_at": (
                datetime.fromtimestamp(self.last_error_at, UTC).isoformat() if self.last_error_at else None
            ),
        }


_lock = threading.Lock()
_statuses: dict[str, ThreadStatus] = {}


def _status_for(name: str) -> ThreadStatus:
    """The record of ``name``; a new supervisor of the same name (the next term) continues it."""
    with _lock:
        status = _statuses.get(name)
        if status is None:
            status = _statuses[name] = ThreadStatus(name=name)
        return status


def supervised_threads_status() -> dict[str, dict[str, Any]]:
    """Every supervised thread of this process by name: alive, state, restarts, last error."""
    with _lock:
        statuses = list(_statuses.values())
    return {status.name: status.as_dict() for status in sorted(statuses, key=lambda s: s.name)}


def supervised_threads_ready() -> bool:
    """The readiness check: False while a supervised thread is dead or restarting in a crash loop."""
    with _lock:
        statuses = list(_statuses.values())
    return all(status.healthy() for status in statuses)


def restart_backoff() -> Backoff:
    """The waits between restarts (``SUPERVISOR_BACKOFF_*``), jittered like every retry."""
    return Backoff(
        initial=settings.SUPERVISOR_BACKOFF_INITIAL_SECONDS,
        maximum=settings.SUPERVISOR_BACKOFF_MAX_SECONDS,
    )


class Supervisor:
    """Run ``target`` until ``stop`` is set, restarting it after every exception."""

    def __init__(
        self,
        name: str,
        target: Callable[[], None],
        *,
        stop: threading.Event,
        on_crash: Callable[[Exception], None] | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.name = name
        self.target = target
        self.stop = stop
        self.on_crash = on_crash
        self.backoff = backoff or Backoff(
            initial=settings.SUPERVISOR_BACKOFF_INITIAL_SECONDS,
            maximum=settings.SUPERVISOR_BACKOFF_MAX_SECONDS,
        )
        self.status = _status_for(name)
        self.status.stop = stop

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name=self.name, daemon=True)
        self.status.thread = thread
        thread.start()
        return thread

    def run(self) -> None:
        """The supervision loop, in the calling thread."""
        status = self.status
        status.thread = threading.current_thread()
        if status.state == CRASHED:  # its owner is restarting it (the ingester's next term)
            status.restarts += 1
        status.state = RUNNING
        ended = DEAD  # unless we get to say otherwise: a BaseException goes through
        try:
            ended = self._loop(status)
        finally:
            status.state = ended
            connection.close()  # this thread's own connection, never handed to another

    def _loop(self, status: ThreadStatus) -> str:
        while True:
            status.started_at = time.monotonic()
            try:
                self.target()
                return STOPPED
            except Exception as exc:  # the whole point: nothing a target raises ends the thread silently
                self._record(status, exc)
                if self.on_crash is not None:
                    self.on_crash(exc)
                    return CRASHED
            status.state = BACKING_OFF
            if self.stop.wait(self.backoff.next_delay()):
                return STOPPED
            status.restarts += 1
            status.state = RUNNING
            log.warning("thread %s: restarting (restart %d)", self.name, status.restarts)

    def _record(self, status: ThreadStatus, exc: Exception) -> None:
        if time.monotonic() - status.started_at >= settings.SUPERVISOR_HEALTHY_AFTER_SECONDS:
            status.failures_in_a_row = 0  # it had been running well: this is a new failure, not a loop
            self.backoff.reset()
        status.failures_in_a_row += 1
        status.last_error = f"{type(exc).__name__}: {exc}"[:500]
        status.last_error_at = time.time()
        log.exception("thread %s crashed (%d in a row)", self.name, status.failures_in_a_row)
        try:
            connection.close()  # a database error may have left it broken; the next run opens another
        except Exception:  # closing a broken connection can fail too; the next run reconnects
            log.debug("thread %s: closing its connection failed", self.name, exc_info=True)


class SupervisedThreadsCollector(Collector):
    """``controlplane_supervised_thread_{up,restarts_total,failures_in_a_row}`` by thread name."""

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        up = GaugeMetricFamily(
            metrics.SUPERVISED_THREAD_UP,
            "1 while a supervised thread runs healthily (alive, not crash-looping)",
            labels=["thread"],
        )
        restarts = CounterMetricFamily(
            metrics.SUPERVISED_THREAD_RESTARTS,
            "Restarts of a supervised thread after a crash",
            labels=["thread"],
        )
        failures = GaugeMetricFamily(
            metrics.SUPERVISED_THREAD_FAILURES,
            "Crashes of a supervised thread since it last ran long enough to count as healthy",
            labels=["thread"],
        )
        with _lock:
            statuses = list(_statuses.values())
        for status in statuses:
            if status.state == STOPPED:
                continue
            up.add_metric([status.name], 1.0 if status.healthy() else 0.0)
            restarts.add_metric([status.name], float(status.restarts))
            failures.add_metric([status.name], float(status.failures_in_a_row))
        yield from (up, restarts, failures)


# In the default registry, which every process's /metrics (web, ingest, decide, workers) serves.
REGISTRY.register(SupervisedThreadsCollector())

"""Heartbeats for the Celery worker and beat (``apps.core.heartbeat``), wired in controlplane/celery.py.

The worker beats from a consumer bootstep on the consumer's timer: the consumer's steps start once
it is connected to the broker and stop when the connection is lost, so a fresh heartbeat means "this
worker consumes", and a stuck event loop stops it too. Beat has no such hook; it beats from a thread
started when the scheduler starts (``beat_init``), which proves the process only.
"""

from __future__ import annotations

import threading
from typing import Any

from celery import bootsteps
from celery.signals import beat_init

from apps.core.heartbeat import BEAT_SECONDS, Heartbeat

WORKER = "worker"
BEAT = "beat"


class ConsumerHeartbeat(bootsteps.StartStopStep):
    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.heartbeat = Heartbeat(WORKER, every=0.0)  # the timer paces it
        self.timer_entry: Any = None

    def start(self, parent: Any) -> None:
        self.heartbeat.beat()
        self.timer_entry = parent.timer.call_repeatedly(BEAT_SECONDS, self.heartbeat.beat)

    def stop(self, parent: Any) -> None:
        if self.timer_entry is not None:
            self.timer_entry.cancel()
            self.timer_entry = None


_beat_stop = threading.Event()


def _start_beat_heartbeat(sender: Any = None, **kwargs: Any) -> None:
    Heartbeat(BEAT).run_in_thread(_beat_stop)


def install(app: Any) -> None:
    app.steps["consumer"].add(ConsumerHeartbeat)
    beat_init.connect(_start_beat_heartbeat, weak=False)

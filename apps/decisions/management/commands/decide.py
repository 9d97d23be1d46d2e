"""Long-running platform-mode watcher: ``python manage.py decide [--processes N]``."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from apps.core.heartbeat import Heartbeat
from apps.core.metrics import serve_metrics
from apps.decisions.watcher import run_decision_watchers
from apps.jobs.clusters import cluster_register_default

# The GIL switch interval of every decide process (CPython's default is 5 ms). Each process is one
# watch thread per cluster reading PodGroup events next to 8 lanes doing ORM work. A thread that
# blocked on a read gets the GIL back only when the running thread has held it for the interval, and
# the watch reads one TLS record at a time, so with several lanes busy it waited once per record and
# fell seconds behind with the next questions already in its socket (seen as Recv-Q; 20 questions
# at once in bench/bench_decisions.py). At 0.5 ms the watch keeps up; the lanes switch more often,
# which costs them little next to their database round trips.
SWITCH_INTERVAL_S = 0.0005


def _serve(shard: int, shards: int) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    serve_metrics("decide", offset=shard)  # the n-th decide process on METRICS_PORT + n
    run_decision_watchers(stop, shard=shard, shards=shards)


class Command(BaseCommand):
    help = "Watch PodGroups for ClusterD's platform-mode questions and answer them (runs until stopped)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--processes",
            type=int,
            default=int(os.environ.get("DECIDE_PROCESSES", "1")),
            help="answer in N processes, each owning a share of the PodGroups (default 1)",
        )

    def handle(self, *args: Any, processes: int, **options: Any) -> None:
        if not 1 <= processes <= 32:
            raise CommandError("--processes must be between 1 and 32", returncode=2)
        sys.setswitchinterval(SWITCH_INTERVAL_S)  # before the children fork: they inherit it
        cluster_register_default()  # as the ingester does: a fresh install's cluster, whoever starts first
        self.stdout.write(f"watching PodGroups for platform-mode questions in {processes} process(es)")
        # The pod's exec probe checks this file's age (deploy/base/decider.yaml).
        heartbeat = Heartbeat("decider")
        if processes == 1:
            beating = threading.Event()
            heartbeat.run_in_thread(beating)
            try:
                _serve(0, 1)
            finally:
                beating.set()
            return
        connections.close_all()  # children open their own
        children = [multiprocessing.Process(target=_serve, args=(i, processes)) for i in range(processes)]
        for child in children:
            child.start()
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        heartbeat.beat()
        while not stop.wait(0.5):
            if any(not child.is_alive() for child in children):
                break
            heartbeat.beat()
        for child in children:
            child.terminate()
        for child in children:
            child.join(10)

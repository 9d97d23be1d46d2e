"""Long-running platform-mode watcher: ``python manage.py decide [--processes N]``.

It answers for the clusters whose ``decide`` lease it holds (``apps.decisions.leases``): any number of
``decide`` deployments share the clusters, and a standby takes a dead holder's clusters at its next
poll. With ``--processes N`` the main process holds the leases and N children answer shards of the
held clusters' PodGroups.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connection, connections

from apps.core.heartbeat import Heartbeat
from apps.core.metrics import serve_metrics
from apps.decisions.leases import (
    LEASE_POLL_SECONDS,
    STOP_SECONDS,
    ClusterWatchers,
    DecideLeases,
    HeldClusters,
    follow_held,
)
from apps.decisions.watcher import PodGroupWatcher, run_decision_watchers
from apps.jobs.clusters import ClusterRescan, cluster_register_default
from apps.jobs.models import Cluster

# The GIL switch interval of every decide process (CPython's default is 5 ms). Each process is one
# watch thread per cluster reading PodGroup events next to 8 lanes doing ORM work. A thread that
# blocked on a read gets the GIL back only when the running thread has held it for the interval, and
# the watch reads one TLS record at a time, so with several lanes busy it waited once per record and
# fell seconds behind with the next questions already in its socket (seen as Recv-Q; 20 questions
# at once in bench/bench_decisions.py). At 0.5 ms the watch keeps up; the lanes switch more often,
# which costs them little next to their database round trips.
SWITCH_INTERVAL_S = 0.0005


def _signals() -> threading.Event:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    return stop


def _serve_shard(shard: int, shards: int, held: HeldClusters, parent_pid: int) -> None:
    """A child: answer shard ``shard`` of ``shards`` of the clusters the main process holds."""
    stop = _signals()
    serve_metrics("decide", offset=1 + shard)  # the n-th child on METRICS_PORT + 1 + n
    watchers = ClusterWatchers(lambda cluster: PodGroupWatcher(cluster, shard=shard, shards=shards))
    follow_held(held, shard, watchers, stop, parent_pid)


def _hold(
    stop: threading.Event, held: HeldClusters, children: list[Any], heartbeat: Heartbeat, names: list[str]
) -> None:
    """The main process of ``--processes N``: hold the leases, publish them to the children."""
    alive = lambda: all(child.is_alive() for child in children)  # noqa: E731

    def publish() -> None:
        held.wait_applied(held.publish(leases.held), STOP_SECONDS + 1.0, alive)

    def released(cluster_id: int) -> None:
        # Called before the lock is let go: the children stop the cluster's watchers first.
        remaining = leases.held - {cluster_id}
        held.wait_applied(held.publish(remaining), STOP_SECONDS + 1.0, alive)

    leases = DecideLeases(taken=lambda cluster: publish(), released=released)
    rescan = ClusterRescan(names or None)
    try:
        while alive():
            heartbeat.beat()
            leases.step(rescan.clusters())
            connection.close()
            if stop.wait(LEASE_POLL_SECONDS):
                break
    finally:
        held.publish(set())
        leases.close()


class Command(BaseCommand):
    help = "Watch PodGroups for ClusterD's platform-mode questions and answer them (runs until stopped)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--processes",
            type=int,
            default=int(os.environ.get("DECIDE_PROCESSES", "1")),
            help="answer in N processes, each a share of the PodGroups of the clusters held (default 1)",
        )
        parser.add_argument(
            "--cluster", action="append", default=[], help="Only this cluster (repeatable; default: all)"
        )

    def handle(self, *args: Any, processes: int, cluster: list[str], **options: Any) -> None:
        if not 1 <= processes <= 32:
            raise CommandError("--processes must be between 1 and 32", returncode=2)
        sys.setswitchinterval(SWITCH_INTERVAL_S)  # before the children fork: they inherit it
        cluster_register_default()  # as the ingester does: a fresh install's cluster, whoever starts first
        unknown = sorted(set(cluster) - set(Cluster.objects.values_list("name", flat=True)))
        if unknown:
            raise CommandError(f"--cluster: unknown cluster(s): {', '.join(unknown)}", returncode=2)
        self.stdout.write(f"watching PodGroups for platform-mode questions in {processes} process(es)")
        # The pod's exec probe checks this file's age (deploy/base/decider.yaml).
        heartbeat = Heartbeat("decider")
        if processes == 1:
            beating = threading.Event()
            heartbeat.run_in_thread(beating)
            try:
                serve_metrics("decide")
                run_decision_watchers(_signals(), cluster_names=cluster or None)
            finally:
                beating.set()
            return
        connections.close_all()  # children open their own
        for conn in connections.all():
            # And the pool itself: a forked child would share its sockets with this process (and
            # with its siblings), interleaving their queries on one session.
            close_pool = getattr(conn, "close_pool", None)
            if close_pool is not None:
                close_pool()
        held = HeldClusters(processes)
        parent = os.getpid()
        fork = multiprocessing.get_context("fork")
        children = [
            fork.Process(target=_serve_shard, args=(i, processes, held, parent)) for i in range(processes)
        ]
        for child in children:
            child.start()
        stop = _signals()
        serve_metrics("decide")  # the main process (its leases) on METRICS_PORT
        heartbeat.beat()
        try:
            _hold(stop, held, children, heartbeat, cluster)
        finally:
            for child in children:
                child.terminate()
            for child in children:
                child.join(10)

"""The ingester's lifecycle: per cluster, a lease, and while it is held, watchers, a ClusterD stream
and an applier (``apps.ingest.watchers``, ``apps.ingest.applier``).

Leadership comes in *terms*: a term starts when this process takes the cluster's lease
(``apps.ingest.lease``) and ends when it stops, loses the lease or gives it back: ``manage.py
ingest`` processes share the clusters fairly (``apps.core.leases.FairShare``, at most ceil(clusters /
live processes) each), so one that is over its share (a process joined) ends the term of its newest
cluster for another to take. Each term has its own threads,
its own queue hand-over (``Feed``) and its own ``halt`` event; a lost lease ends the term (items not
stored are not acknowledged by any cursor) and the process waits as a standby again.

Every thread runs under a ``Supervisor`` (``apps.core.supervision``). The leader restarts in place
after a crash. A term thread that crashes (a database outage the store did not ride out, an
``IntegrityError``, a bug) ends its term the way a lost lease does, and the leader starts the next
term after the shared backoff: all of the term's threads restart together from the stored cursors,
so nothing the applier held in its buffer is lost by restarting one thread alone.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.db import DatabaseError, connection

from apps.cluster.watch import WatchTarget
from apps.core.leases import INGEST, FairShare
from apps.core.supervision import Supervisor, restart_backoff
from apps.ingest.applier import Applier
from apps.ingest.feed import Feed, SyncGate
from apps.ingest.items import Item, source_of, sources_of, watch_targets
from apps.ingest.lease import ClusterLease
from apps.ingest.watchers import ClusterDFollower, follow_stream
from apps.jobs.clusters import ClusterRescan, cluster_ref
from apps.jobs.models import Cluster

log = logging.getLogger(__name__)

LEASE_POLL_SECONDS = 1.0
# A leader that lost its lease waits this long before competing again: longer than a standby's poll.
LEASE_RETAKE_SECONDS = 3 * LEASE_POLL_SECONDS
# A term's end waits this long in all for its threads (the applier first); ``stop`` this much more,
# so the leader's term has ended and given the lease back when it returns.
TERM_JOIN_SECONDS = 5.0


class ClusterIngester:
    """Everything that ingests one cluster; ``start()`` spawns the threads, ``stop()`` ends them."""

    def __init__(
        self, cluster: Cluster, stop: threading.Event | None = None, *, share: FairShare | None = None
    ) -> None:
        self.cluster = cluster
        # This process's share of the clusters; None: compete for the lease whatever else it holds.
        self.share = share
        self.ref = cluster_ref(cluster)
        self.stop_event = stop or threading.Event()
        self.queue: queue.Queue[Item] = queue.Queue(maxsize=int(settings.EVENTS_INGEST_QUEUE))
        self.threads: list[threading.Thread] = []
        self._leader: threading.Thread | None = None
        self.watch_timeout = int(settings.EVENTS_WATCH_TIMEOUT_SECONDS)
        self.backoff_max = settings.EVENTS_INGEST_BACKOFF_MAX_SECONDS
        self.db_retry_max = settings.EVENTS_INGEST_DB_RETRY_MAX_SECONDS
        self._applied_before = 0  # items stored by this process's finished terms
        self._count_lock = threading.Lock()
        self.active = threading.Event()  # set while this process holds the cluster's lease
        self.lost = threading.Event()  # set by the applier when the lease is gone
        self.crashed = threading.Event()  # set when a thread of the current term crashed
        self.yielded = threading.Event()  # set when the term ended to give the lease back (the share)
        self.term_backoff = restart_backoff()
        self.halt = threading.Event()  # the current term's stop signal
        self.terms = 0
        self.standby = False
        self._applier: Applier | None = None
        self._clusterd: ClusterDFollower | None = None

    @property
    def applied(self) -> int:
        """Items this process has stored, over all its terms."""
        with self._count_lock:
            return self._applied_before + (self._applier.applied if self._applier is not None else 0)

    @property
    def live(self) -> bool:
        """This process leads the cluster and its current term is past the warm-up (steady state).

        Until then a take-over's replay is merged with the longer warm-up hold, so a latency measured
        before it is the warm-up's, not the live path's.
        """
        applier = self._applier
        return applier is not None and applier.live

    # --- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        """Become the cluster's active ingester (or wait as a standby), then start the threads."""
        self._leader = self._spawn(self._lead, f"ingest-leader-{self.cluster.name}", self.stop_event)

    def _lead(self) -> None:
        while not self.stop_event.is_set():
            try:
                with ClusterLease(self.cluster.pk, label=self.cluster.name) as lease:
                    # Stopped while taking it (a removed cluster's standby): give it straight back.
                    if not self._acquire(lease) or self.stop_event.is_set():
                        return
                    self._term(lease)
            finally:
                if self.share is not None:
                    self.share.released(self.cluster.pk)
            if self.crashed.is_set():
                # Not before the backoff: a term that crashes at once would otherwise spin.
                self.crashed.clear()
                self.stop_event.wait(self.term_backoff.next_delay())
            elif self.lost.is_set() or self.yielded.is_set():
                # Step aside before asking again: this process notices the loss at its next batch
                # and would ask within milliseconds, while a standby asks once per poll, so it
                # would win the lease straight back from the standby it is meant to hand over to.
                # The same after giving it back: the process it is meant for polls once a second.
                self.stop_event.wait(LEASE_RETAKE_SECONDS)

    def _acquire(self, lease: ClusterLease) -> bool:
        """Wait for the lease (as a standby); False when stopped first."""
        while not self.stop_event.is_set():
            try:
                if self.share.try_take(lease) if self.share is not None else lease.acquire():
                    return True
            except DatabaseError as exc:
                log.warning("cluster %s: cannot ask for the lease: %s", self.cluster.name, exc)
                connection.close()
            self.standby = True
            self.stop_event.wait(LEASE_POLL_SECONDS)
        return False

    def _term(self, lease: ClusterLease) -> None:
        """Lead until stopped or until the applier finds the lease gone; then end this term's threads."""
        halt = threading.Event()
        self.halt = halt
        self.lost.clear()
        self.crashed.clear()
        self.yielded.clear()
        feed = Feed(self.queue, halt)
        gate = SyncGate(sources_of(self.cluster))
        applier = Applier(
            self.cluster, feed, gate, lease=lease, lost=self.lost, db_retry_max=self.db_retry_max
        )
        self._applier = applier
        self.terms += 1
        self.standby = False
        self.active.set()
        log.info("cluster %s: this process is the active ingester", self.cluster.name)
        started = time.monotonic()
        term_threads = [self._spawn(applier.run, f"ingest-apply-{self.cluster.name}", halt, term=True)]
        for target in watch_targets(self.cluster):
            term_threads.append(
                self._spawn(
                    self._follow(target, feed, gate),
                    f"ingest-{self.cluster.name}-{source_of(target)}",
                    halt,
                    term=True,
                )
            )
        if self.cluster.clusterd_address:
            self._clusterd = ClusterDFollower(self.cluster, self.ref, feed, backoff_max=self.backoff_max)
            term_threads.append(
                self._spawn(self._clusterd.run, f"ingest-{self.cluster.name}-clusterd", halt, term=True)
            )
        while (
            not self.stop_event.wait(0.2)
            and not self.lost.is_set()
            and not self.crashed.is_set()
            and not self._over_share()
        ):
            pass
        if time.monotonic() - started >= settings.SUPERVISOR_HEALTHY_AFTER_SECONDS:
            self.term_backoff.reset()
        halt.set()
        self._close_clusterd()
        # The applier first (it is term_threads[0]), for up to TERM_JOIN_SECONDS: the lease is given
        # back only once it stopped storing. The watchers only read, and one blocked in a quiet watch
        # ends only when its call does (its items go to this term's feed, which nobody applies), so
        # together they get what is left of the same time, not that much each: with a join of 5 s
        # per thread a graceful hand-over (a rolling update's SIGTERM, a fair-share release) kept the
        # lease up to 5 s per quiet watch, half a minute.
        deadline = time.monotonic() + TERM_JOIN_SECONDS
        for thread in term_threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.threads = [t for t in self.threads if t not in term_threads]
        with self._count_lock:
            self._applied_before += applier.applied
            self._applier = None
        self.active.clear()
        if self.lost.is_set() or self.crashed.is_set() or self.yielded.is_set():
            self.standby = True
            why = (
                "a thread of the term crashed"
                if self.crashed.is_set()
                else "lost the lease"
                if self.lost.is_set()
                else "gave the lease back (over this process's share)"
            )
            log.warning("cluster %s: %s; back to standby", self.cluster.name, why)
            feed.drain()  # not stored, not acknowledged by a cursor: the next leader replays it

    def _over_share(self) -> bool:
        """Whether this process should hand the cluster to another (it is over its fair share)."""
        if self.share is None or not self.share.should_release(self.cluster.pk):
            return False
        self.yielded.set()
        return True

    def _follow(self, target: WatchTarget, feed: Feed, gate: SyncGate) -> Callable[[], None]:
        def run() -> None:
            follow_stream(
                self.cluster,
                self.ref,
                target,
                feed,
                gate,
                watch_timeout=self.watch_timeout,
                backoff_max=self.backoff_max,
                db_retry_max=self.db_retry_max,
            )

        return run

    def _close_clusterd(self) -> None:
        if self._clusterd is not None:
            self._clusterd.close()

    def _spawn(
        self, target: Callable[[], None], name: str, stop: threading.Event, *, term: bool = False
    ) -> threading.Thread:
        """Start ``target`` supervised; a term thread's crash ends the term (see the module docstring)."""
        on_crash = self._term_crashed if term else None
        thread = Supervisor(name, target, stop=stop, on_crash=on_crash).start()
        self.threads.append(thread)
        return thread

    def _term_crashed(self, exc: Exception) -> None:
        self.crashed.set()

    def request_stop(self) -> None:
        """Ask every thread to end (the lease is given back as the term ends); returns at once."""
        self.stop_event.set()
        self.halt.set()
        self._close_clusterd()

    def stopped(self) -> bool:
        return not any(thread.is_alive() for thread in self.threads)

    def stop(self, timeout: float = 2 * TERM_JOIN_SECONDS) -> None:
        """Stop and wait up to ``timeout`` for the leader: its term ends its threads (a watcher blocked
        in a quiet call is left to end with it) and gives the lease back."""
        self.request_stop()
        if self._leader is not None:
            self._leader.join(timeout)


def _connection_fields(cluster: Cluster) -> tuple[object, ...]:
    """What an ingester was built from (where the cluster is, what it watches)."""
    return (
        cluster.kubeconfig_path,
        cluster.context,
        cluster.in_cluster,
        cluster.clusterd_address,
        sorted(cluster.namespaces or []),
    )


class ProcessIngesters:
    """This process's ingesters, one per cluster it competes for, kept in step with the clusters.

    ``sync()`` (the command's main loop calls it) lists the clusters (again every
    ``CLUSTER_RESCAN_SECONDS``, the decider's ``ClusterRescan``): a cluster that appeared gets an
    ingester, which competes for its lease under this process's fair share (the share's cluster count
    follows the listing, so the processes rebalance as they do when one joins); the ingester of a
    cluster that was removed, or whose address or namespaces changed, is stopped, and so gives its
    lease back. A changed cluster's new ingester starts only once the old one has ended, so one process
    never has two ingesters of a cluster counted in its share.
    """

    def __init__(self, cluster_names: list[str] | None = None) -> None:
        self.rescan = ClusterRescan(cluster_names)
        self.share = FairShare(INGEST, 0)
        try:
            self.share.members.join()  # counted before asking for any lease: the others make room at once
        except DatabaseError as exc:  # counted at the first poll that reaches the database
            log.warning("cannot join the ingesters' count yet: %s", exc)
        self.running: dict[int, ClusterIngester] = {}
        self.retiring: list[ClusterIngester] = []
        self.started: list[ClusterIngester] = []  # every ingester this process ran, for the totals

    @property
    def applied(self) -> int:
        return sum(ingester.applied for ingester in self.started)

    def sync(self) -> None:
        """Start the ingesters of new clusters, stop those of clusters gone or changed."""
        clusters = {cluster.pk: cluster for cluster in self.rescan.clusters()}
        connection.close()  # the main loop holds no connection between listings
        for cluster_id, ingester in list(self.running.items()):
            cluster = clusters.get(cluster_id)
            if cluster is not None and _connection_fields(cluster) == _connection_fields(ingester.cluster):
                continue
            why = "removed" if cluster is None else "changed"
            log.warning("cluster %s: %s; its ingester stops", ingester.cluster.name, why)
            del self.running[cluster_id]
            ingester.request_stop()
            self.retiring.append(ingester)
        self.retiring = [ingester for ingester in self.retiring if not ingester.stopped()]
        ending = {ingester.cluster.pk for ingester in self.retiring}
        self.share.clusters = len(clusters)
        for cluster_id, cluster in clusters.items():
            if cluster_id in self.running or cluster_id in ending:
                continue
            ingester = ClusterIngester(cluster, share=self.share)
            self.running[cluster_id] = ingester
            self.started.append(ingester)
            ingester.start()
            log.info("cluster %s: competing for its ingest lease", cluster.name)

    def stop(self) -> None:
        ingesters = [*self.running.values(), *self.retiring]
        for ingester in ingesters:
            ingester.request_stop()
        for ingester in ingesters:
            ingester.stop()
        self.running, self.retiring = {}, []
        self.share.close()

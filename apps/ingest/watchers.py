"""The ingester's watchers: they only read, and put what they read on the term's ``Feed``.

A Kubernetes stream resumes from its cursor (everything up to it was stored before; the backlog
arrives as ordinary watch events), or lists when it has none, through the cluster adapter's one
watch loop (410 → relist, bookmarks, backoff). The ClusterD stream reconnects with capped
exponential backoff and jitter.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.db import DatabaseError, connection
from django.utils import timezone

from apps.cluster import client as kube
from apps.cluster.backoff import Backoff
from apps.cluster.errors import ClusterError
from apps.cluster.watch import WatchHandler, WatchLoop, WatchTarget
from apps.clusterd.client import ClusterDError, FaultSignal, FaultStream, get_faults_retrying
from apps.core import metrics as core_metrics
from apps.events import metrics
from apps.ingest import clusterd_faults
from apps.ingest.cursors import cursor_load
from apps.ingest.feed import Feed, SyncGate
from apps.ingest.items import BOOKMARK, CLUSTERD_SOURCE, LISTED, SIGNAL, Item, Listing, source_of
from apps.ingest.store import clusterd_faulty_jobs
from apps.jobs.models import Cluster

log = logging.getLogger(__name__)

QUERY_RETRY_S = 0.2  # after a refusal by ClusterD's 10/s limiter
QUERY_RETRY_FOR_S = 30.0
SNAPSHOT_WAIT_S = 5.0  # at most, for the fault stream's opening snapshot before asking about jobs
SNAPSHOT_QUIET_S = 0.2  # the snapshot is in once the stream has been this quiet after its first message


class StreamToFeed(WatchHandler):
    """One Kubernetes stream's events as ``Item``s, and its sync: the backlog has started arriving."""

    def __init__(self, target: WatchTarget, feed: Feed, gate: SyncGate) -> None:
        self.source = source_of(target)
        self.target = target
        self.resource = target.resource
        self.feed = feed
        self.gate = gate
        self.flowing = False

    def _item(self, event_type: str, obj: Any, resource_version: str) -> Item:
        return Item(self.source, self.resource, event_type, obj, resource_version, timezone.now())

    def listed(self, items: list[dict[str, Any]], resource_version: str) -> None:
        present = set()
        for obj in items:
            meta = obj.get("metadata") or {}
            present.add((str(meta.get("namespace", "")), str(meta.get("name", ""))))
            # Listed objects do not advance the cursor: the list's own version does, below.
            self.feed.put(self._item("ADDED", obj, ""))
        self.feed.put(
            self._item(LISTED, Listing(self.target.namespace, frozenset(present)), resource_version)
        )
        self.gate.done(self.source)

    def changed(self, event_type: str, obj: dict[str, Any], resource_version: str) -> None:
        self.feed.put(self._item(event_type, obj, resource_version))
        self._flows()

    def bookmark(self, resource_version: str) -> None:
        self.feed.put(self._item(BOOKMARK, {}, resource_version))
        self._flows()

    def resume(self, resource_version: str) -> None:
        """Resuming from the cursor: it is this source's first watermark (the stream has not flowed yet)."""
        self.feed.put(self._item(BOOKMARK, {}, resource_version))

    def _flows(self) -> None:
        # A resumed source is synced once its stream flows, not when its cursor was read: opening
        # a watch can take seconds (seen: 5 s for core resources right after a take-over), and the
        # warm-up hold must not start before the backlog.
        if not self.flowing:
            self.flowing = True
            self.gate.done(self.source)

    def opened(self) -> None:
        # The server answered the resumed watch: its backlog comes first, from now on. Waiting for
        # a first event or bookmark instead kept a take-over waiting SYNC_TIMEOUT_SECONDS (15 s)
        # whenever a watched resource was quiet (a real API server bookmarks once a minute; a
        # cluster without ClusterD Events has a quiet Events stream): every fault of the cluster
        # waited with it (the strict sustained benchmark, stop 36). The warm-up's longer hold that
        # follows keeps a backlog that is still arriving in order.
        self._flows()

    def watch_ended(self) -> None:
        self.gate.done(self.source)  # the call ended: whatever backlog there was came

    def failed(self, error: ClusterError, delay: float) -> None:
        metrics.INGEST_ERRORS.labels(source=self.resource).inc()
        core_metrics.WATCH_RESTARTS.labels(process="ingest", resource=self.resource, reason="error").inc()

    def expired(self, error: ClusterError) -> None:
        core_metrics.WATCH_RESTARTS.labels(process="ingest", resource=self.resource, reason="expired").inc()


def resume_point(cluster: Cluster, source: str, feed: Feed, retry_max: float) -> str | None:
    """The source's cursor, waiting out a database outage; None when the term ended first."""
    delay = 0.5
    while not feed.halt.is_set():
        try:
            return cursor_load(cluster, source)
        except DatabaseError as exc:
            log.warning("cluster %s: %s: cannot read the cursor: %s", cluster.name, source, exc)
            feed.halt.wait(delay)
            delay = min(retry_max, delay * 2)
        finally:
            # Back to the pool at once: a watcher runs for hours and never needs it again.
            connection.close()
    return None


def follow_stream(
    cluster: Cluster,
    ref: kube.ClusterRef,
    target: WatchTarget,
    feed: Feed,
    gate: SyncGate,
    *,
    watch_timeout: int,
    backoff_max: float,
    db_retry_max: float,
) -> None:
    """One Kubernetes stream until the term ends (a thread's target)."""
    handler = StreamToFeed(target, feed, gate)
    resource_version = resume_point(cluster, handler.source, feed, db_retry_max)
    if resource_version is None:
        return
    if resource_version:
        handler.resume(resource_version)
    WatchLoop(
        ref,
        target,
        handler,
        feed.halt,
        resource_version=resource_version,
        watch_timeout=watch_timeout,
        backoff=Backoff(maximum=backoff_max),
    ).run()


class ClusterDFollower:
    """ClusterD's fault stream as ``SIGNAL`` items, each placed at the API server's version on arrival."""

    def __init__(self, cluster: Cluster, ref: kube.ClusterRef, feed: Feed, *, backoff_max: float) -> None:
        self.cluster = cluster
        self.ref = ref
        self.feed = feed
        self.backoff = Backoff(maximum=backoff_max)
        self.streams: list[FaultStream] = []
        # Jobs whose newest signal put on the feed (this term) had faults: with the stored ones,
        # the jobs to ask about after (re)subscribing.
        self.faulty: set[str] = set()
        # One writer at a time (the stream's thread, the reconciler's), and per job the signals the
        # current stream delivered: a query's answer goes on the feed only if the stream said
        # nothing of that job meanwhile (the stream's word is then as new or newer).
        self._lock = threading.Lock()
        self._streamed: dict[str, int] = {}
        self._stream_heard = threading.Event()  # the current stream delivered something
        self._last_streamed = 0.0  # monotonic, the current stream's latest delivery

    def close(self) -> None:
        for stream in list(self.streams):
            stream.close()

    def run(self) -> None:
        halt = self.feed.halt
        while not halt.is_set():
            stream = FaultStream(self.cluster.clusterd_address)
            self.streams.append(stream)
            over = threading.Event()  # this connection ended: its reconciler stops and puts nothing
            with self._lock:
                self._streamed = {}
            self._stream_heard.clear()
            reconciler = threading.Thread(
                target=self._reconcile_or_reconnect,
                args=(stream, over),
                daemon=True,
                name=f"ingest-{self.cluster.name}-clusterd-reconcile",
            )
            reconciler.start()
            try:
                for signal in stream:
                    self.backoff.reset()
                    self._put(signal, over, streamed=True)
                    if halt.is_set():
                        break
            except ClusterDError as exc:
                metrics.INGEST_ERRORS.labels(source=CLUSTERD_SOURCE).inc()
                log.warning("cluster %s: ClusterD stream: %s; reconnecting", self.cluster.name, exc.message)
            finally:
                with self._lock:
                    over.set()
                stream.close()
                self.streams.remove(stream)
            # Jitter keeps many ingesters from reconnecting in step after a ClusterD restart.
            halt.wait(self.backoff.next_delay())

    def _heard_of(self, job_id: str) -> tuple[int, int]:
        """What the current stream delivered about ``job_id``: its own signals, and whole-cluster ones
        (a job id of "": a "normal" there clears every job). Called with the lock held."""
        return self._streamed.get(job_id, 0), self._streamed.get("", 0)

    def _put(
        self, signal: FaultSignal, over: threading.Event, *, streamed: bool, asked: tuple[int, int] = (0, 0)
    ) -> bool:
        """Put ``signal`` on the feed; a query's answer (``streamed=False``) only while its connection
        lasts and if the stream delivered nothing of its job since the question (``asked``)."""
        with self._lock:
            if over.is_set() and not streamed:
                return False
            if streamed:
                self._streamed[signal.job_id] = self._streamed.get(signal.job_id, 0) + 1
                self._last_streamed = time.monotonic()
                self._stream_heard.set()
            elif self._heard_of(signal.job_id) != asked:
                return False
            position = self._server_position()
            self.feed.put(Item(CLUSTERD_SOURCE, CLUSTERD_SOURCE, SIGNAL, signal, position, timezone.now()))
            if not signal.job_id:
                if signal.signal_type == clusterd_faults.NORMAL:
                    self.faulty.clear()
            elif signal.signal_type == clusterd_faults.NORMAL:
                self.faulty.discard(signal.job_id)
            else:
                self.faulty.add(signal.job_id)
            return True

    def _reconcile_or_reconnect(self, stream: FaultStream, over: threading.Event) -> None:
        """``_reconcile``; if ClusterD cannot be asked, the stream is closed so the follower reconnects
        (and asks again) as for a broken stream."""
        try:
            self._reconcile(over)
        except ClusterDError as exc:
            metrics.INGEST_ERRORS.labels(source=CLUSTERD_SOURCE).inc()
            log.warning("cluster %s: ClusterD query: %s; reconnecting", self.cluster.name, exc.message)
            stream.close()
        except Exception:
            log.exception("cluster %s: asking ClusterD about jobs failed; reconnecting", self.cluster.name)
            stream.close()

    def _reconcile(self, over: threading.Event) -> None:
        """Ask ClusterD about every job last known with faults that the new stream does not name.

        On subscribe ClusterD sends the current faults (clusterd-wire.md): the jobs that have some,
        nothing about the others. A job whose faults cleared while this process was not listening
        (a reconnect; a take-over after the last holder's final signals were dropped unstored)
        would keep its stored fault set, and the next fault on the same device would be "not new"
        and never detected from ClusterD. ClusterD answers 10 questions a second, so asking about
        a hundred jobs takes ten seconds: asked before subscribing (as before stop 36), every fault
        that came and went in that time was never seen (the strict sustained benchmark's take-over
        lost 276). So the stream comes first and the questions run beside it, after its opening
        snapshot: a job the stream names needs no question, and an answer goes on the feed only if
        the stream said nothing of its job meanwhile, so the feed keeps ClusterD's order per job.
        A job that faults again on the same device before its question is answered is still missed
        (its stale set says "not new"): the window is the number of such jobs / 10 s.
        """
        self._await_snapshot(over)
        with self._lock:
            wanted = set(self.faulty)
        wanted |= self._stored_faulty()
        for job_id in sorted(wanted):
            if over.is_set() or self.feed.halt.is_set():
                return
            with self._lock:
                asked = self._heard_of(job_id)
            if any(asked):
                continue  # the stream named it (or cleared every job): its state is current
            answer = self._query(job_id, over)
            if answer is not None:
                self._put(answer, over, streamed=False, asked=asked)

    def _await_snapshot(self, over: threading.Event) -> None:
        """Until the stream's opening snapshot is in (its first message, then SNAPSHOT_QUIET_S without
        another), at most SNAPSHOT_WAIT_S: an answer read before a snapshot message of the same job
        would go on the feed out of order."""
        deadline = time.monotonic() + SNAPSHOT_WAIT_S
        if not self._stream_heard.wait(SNAPSHOT_WAIT_S):
            return
        while not over.is_set() and time.monotonic() < deadline:
            quiet = time.monotonic() - self._last_streamed
            if quiet >= SNAPSHOT_QUIET_S:
                return
            over.wait(SNAPSHOT_QUIET_S - quiet)

    def _stored_faulty(self) -> set[str]:
        delay = 0.5
        while not self.feed.halt.is_set():
            try:
                return clusterd_faulty_jobs(self.cluster)
            except DatabaseError as exc:
                log.warning("cluster %s: cannot read the stored ClusterD faults: %s", self.cluster.name, exc)
                self.feed.halt.wait(delay)
                delay = min(self.backoff.maximum, delay * 2)
            finally:
                connection.close()
        return set()

    def _query(self, job_id: str, over: threading.Event) -> FaultSignal | None:
        """The job's current faults (``normal`` when ClusterD holds none); None: ClusterD refused the
        question itself. A refusal for the rate is asked again; an unreachable ClusterD raises, and
        the follower reconnects as for a broken stream."""
        try:
            return get_faults_retrying(
                self.cluster.clusterd_address,
                job_id=job_id,
                retry_every=QUERY_RETRY_S,
                give_up_after=QUERY_RETRY_FOR_S,
                stop=over,
            )
        except ClusterDError as exc:
            if not exc.permanent:
                raise
            log.warning(
                "cluster %s: ClusterD refused a query about job %s: %s",
                self.cluster.name,
                job_id,
                exc.message,
            )
            return None

    def _server_position(self) -> str:
        """The API server's resourceVersion now: a ClusterD signal sorts after what was written before it.

        "" when the API server cannot say (the signal then sorts after the newest version seen).
        """
        namespace = (list(self.cluster.namespaces) or [None])[0]
        try:
            return kube.current_resource_version(self.ref, "ascendjobs", namespace=namespace)
        except ClusterError as exc:
            log.info("cluster %s: no resourceVersion for a ClusterD signal: %s", self.cluster.name, exc)
            return ""

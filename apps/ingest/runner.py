"""The ingester's threads: per cluster, a watcher per (resource, namespace), a ClusterD stream, an applier.

Watchers only read: they put ``(source, type, object)`` on the cluster's queue. The applier stores
each item in arrival order and only then advances that source's ``IngestCursor``, so a cursor never
passes an unstored event; after ``kill -9`` the watch resumes from the cursor and anything replayed
is recognised by the store. ``410 Gone`` (cursor too old) means relist, which the store also
tolerates. The ClusterD stream reconnects with capped exponential backoff.

A database outage of any length loses nothing: the applier retries a connection error without
limit (capped backoff) and the item's cursor waits for it. The cluster's lease (a session lock)
is rechecked before every batch; an ingester whose session dropped stops applying at once, ends
its threads (items not stored are not acknowledged by any cursor) and goes back to standby.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import queue
import random
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, close_old_connections, connection
from django.utils import timezone

from apps.cluster import client as kube
from apps.cluster.errors import ClusterError
from apps.clusterd.client import ClusterDError, FaultSignal, FaultStream
from apps.events import broadcast, metrics
from apps.events.models import IngestCursor
from apps.ingest.store import IngestStore
from apps.jobs.models import Cluster
from mindcluster import keys as c

log = logging.getLogger(__name__)

CLUSTERD_SOURCE = "clusterd"
CURSOR_FLUSH_SECONDS = 0.5
LEASE_POLL_SECONDS = 1.0
# A leader that lost its lease waits this long before competing again: longer than a standby's poll.
LEASE_RETAKE_SECONDS = 3 * LEASE_POLL_SECONDS
SYNC_TIMEOUT_SECONDS = 15.0
LEASE_NAMESPACE = 0x6576  # first key of the two-int advisory lock: "ev"
PRUNE_EVERY_SECONDS = 600.0
MAX_HELD = 50_000  # items the merge holds at most; beyond it, order gives way to progress


@dataclass(frozen=True)
class WatchSpec:
    """One list+watch: a resource in one namespace (None = all), optionally narrowed by field selector."""

    resource: str
    namespace: str | None = None
    field_selector: str = ""

    @property
    def source(self) -> str:
        where = self.namespace or "*"
        return f"{self.resource}:{where}" + (f":{self.field_selector}" if self.field_selector else "")


@dataclass(frozen=True)
class Item:
    """A unit of work for the applier."""

    source: str
    resource: str  # a watched resource, or CLUSTERD_SOURCE
    event_type: str
    obj: Any
    resource_version: str
    received_at: datetime


class LeaseLost(Exception):
    """This process no longer holds the cluster's lease: stop applying, let the holder do it."""


def db_unreachable(exc: BaseException) -> bool:
    """A connection-level failure (server down, session killed, pool timeout): waiting helps."""
    return isinstance(exc, OperationalError | InterfaceError)


class ClusterLease:
    """One active ingester per cluster: a PostgreSQL session advisory lock (a lock file on SQLite).

    Incidents are built from the order in which a cluster's events are seen, so two processes
    applying the same streams at different speeds would interleave them. Any number of ``ingest``
    processes may run; one holds the lease and the others wait as hot standbys. The lock belongs to
    a database session (or an open file), so ``kill -9`` releases it and a standby takes over.
    """

    def __init__(self, cluster_id: int) -> None:
        self.cluster_id = cluster_id
        self.held = False
        self.backend_pid = 0  # the PostgreSQL session holding the lock
        self._file: Any = None

    def __enter__(self) -> ClusterLease:
        return self

    def acquire(self) -> bool:
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_try_advisory_lock(%s, %s), pg_backend_pid()",
                    [LEASE_NAMESPACE, self.cluster_id],
                )
                held, self.backend_pid = cursor.fetchone()
                self.held = bool(held)
            return self.held
        import fcntl

        path = Path(settings.VAR_DIR) / f"ingest-cluster-{self.cluster_id}.lock"
        handle = path.open("a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            return False
        self._file, self.held = handle, True
        return True

    def still_held(self) -> bool:
        """Whether the lock's session still holds it; asked from any thread (its own connection).

        A session that died (server restart, ``pg_terminate_backend``, a cut network) lost the lock
        with it, and a standby may hold it now. Raises the database's error when it cannot answer.
        """
        if not self.held:
            return False
        if self._file is not None:
            return True  # SQLite: the lock lives as long as our open file
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 2 AND pid = %s)",
                [LEASE_NAMESPACE, self.cluster_id, self.backend_pid],
            )
            return bool(cursor.fetchone()[0])

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()
        elif self.held:
            with contextlib.suppress(Exception), connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LEASE_NAMESPACE, self.cluster_id])
        connection.close()  # the session (and with it any lock) ends here


def watch_specs(cluster: Cluster) -> list[WatchSpec]:
    """What to watch in ``cluster``: its namespaces (or all), plus ``mindx-dl``'s reschedule record."""
    namespaces: list[str | None] = list(cluster.namespaces) or [None]
    specs = [
        WatchSpec(resource, ns)
        for resource in ("ascendjobs", "podgroups", "configmaps", "events")
        for ns in namespaces
    ]
    if namespaces != [None] and c.MINDX_NAMESPACE not in namespaces:
        specs.append(
            WatchSpec("configmaps", c.MINDX_NAMESPACE, f"metadata.name={c.RESCHEDULE_REASON_CONFIGMAP}")
        )
    return specs


class ClusterIngester:
    """Everything that ingests one cluster; ``start()`` spawns the threads, ``stop()`` ends them.

    Leadership comes in *terms*: a term starts when this process takes the cluster's lease and
    ends when it stops or loses the lease. Each term has its own threads and its own ``halt``
    event; a lost lease ends the term and the process waits as a standby again.
    """

    def __init__(self, cluster: Cluster, stop: threading.Event | None = None) -> None:
        self.cluster = cluster
        self.ref = IngestStore(cluster).ref
        self.stop_event = stop or threading.Event()
        self.queue: queue.Queue[Item] = queue.Queue(maxsize=int(settings.EVENTS_INGEST_QUEUE))
        self.threads: list[threading.Thread] = []
        self.watch_timeout = int(settings.EVENTS_WATCH_TIMEOUT_SECONDS)
        self.backoff_max = settings.EVENTS_INGEST_BACKOFF_MAX_SECONDS
        self.db_retry_max = settings.EVENTS_INGEST_DB_RETRY_MAX_SECONDS
        self.applied = 0
        self.streams: list[FaultStream] = []
        self.active = threading.Event()  # set while this process holds the cluster's lease
        self.lost = threading.Event()  # set by the applier when the lease is gone
        self.halt = threading.Event()  # the current term's stop signal
        self.terms = 0
        self.lease: ClusterLease | None = None
        # Sources whose initial list (or resumed watch) has not started yet: nothing is applied
        # until every source has delivered its backlog, so the first items can be put in order.
        self.unsynced = {spec.source for spec in watch_specs(cluster)}
        self.sync_lock = threading.Lock()
        self.standby = False

    # --- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        """Become the cluster's active ingester (or wait as a standby), then start the threads."""
        self._spawn(self._lead, f"ingest-leader-{self.cluster.name}")

    def _lead(self) -> None:
        while not self.stop_event.is_set():
            with ClusterLease(self.cluster.pk) as lease:
                if not self._acquire(lease):
                    return
                self._term(lease)
            if self.lost.is_set():
                # Step aside before asking again: this process notices the loss at its next batch
                # and would ask within milliseconds, while a standby asks once per poll, so it
                # would win the lease straight back from the standby it is meant to hand over to.
                self.stop_event.wait(LEASE_RETAKE_SECONDS)

    def _acquire(self, lease: ClusterLease) -> bool:
        """Wait for the lease (as a standby); False when stopped first."""
        while not self.stop_event.is_set():
            try:
                if lease.acquire():
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
        self.halt, self.lease = halt, lease
        self.lost.clear()
        with self.sync_lock:
            self.unsynced = {spec.source for spec in watch_specs(self.cluster)}
        self.terms += 1
        self.standby = False
        self.active.set()
        log.info("cluster %s: this process is the active ingester", self.cluster.name)
        term_threads = [self._spawn(self._apply_loop, f"ingest-apply-{self.cluster.name}", halt)]
        for spec in watch_specs(self.cluster):
            term_threads.append(
                self._spawn(self._watch_loop, f"ingest-{self.cluster.name}-{spec.source}", spec, halt)
            )
        if self.cluster.clusterd_address:
            term_threads.append(
                self._spawn(self._clusterd_loop, f"ingest-{self.cluster.name}-clusterd", halt)
            )
        while not self.stop_event.wait(0.2) and not self.lost.is_set():
            pass
        halt.set()
        for stream in list(self.streams):
            stream.close()
        for thread in term_threads:
            thread.join(5.0)
        self.threads = [t for t in self.threads if t not in term_threads]
        self.active.clear()
        if self.lost.is_set():
            self.standby = True
            log.warning("cluster %s: lost the lease; back to standby", self.cluster.name)
            self._drain_queue()  # not stored, not acknowledged by a cursor: the next leader replays it

    def _drain_queue(self) -> None:
        while True:
            try:
                self.queue.get_nowait()
            except queue.Empty:
                return

    def _spawn(self, target: Any, name: str, *args: Any) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()
        return thread

    def stop(self, timeout: float = 5.0) -> None:
        self.stop_event.set()
        self.halt.set()
        for stream in list(self.streams):
            stream.close()
        for thread in list(self.threads):
            thread.join(timeout)

    # --- cursors ----------------------------------------------------------------------------------
    def load_cursor(self, source: str) -> str:
        row = IngestCursor.objects.filter(cluster=self.cluster, source=source).first()
        return row.resource_version if row else ""

    def save_cursor(self, source: str, resource_version: str) -> None:
        IngestCursor.objects.update_or_create(
            cluster=self.cluster, source=source, defaults={"resource_version": resource_version}
        )

    # --- watchers ---------------------------------------------------------------------------------
    def _put(self, item: Item, halt: threading.Event) -> None:
        while not halt.is_set():
            try:
                self.queue.put(item, timeout=0.5)  # back-pressure: a slow database slows the watch
                return
            except queue.Full:
                continue

    def _watch_loop(self, spec: WatchSpec, halt: threading.Event) -> None:
        try:
            self._watch(spec, halt)
        finally:
            connection.close()  # this thread's connection (it read the cursor)

    def _resume_point(self, spec: WatchSpec, halt: threading.Event) -> str | None:
        """The source's cursor, waiting out a database outage; None when halted first."""
        delay = 0.5
        while not halt.is_set():
            try:
                return self.load_cursor(spec.source)
            except DatabaseError as exc:
                log.warning("cluster %s: %s: cannot read the cursor: %s", self.cluster.name, spec.source, exc)
                halt.wait(delay)
                delay = min(self.db_retry_max, delay * 2)
            finally:
                # Back to the pool at once: a watcher runs for hours and never needs it again.
                connection.close()
        return None

    def _watch(self, spec: WatchSpec, halt: threading.Event) -> None:
        delay = 0.5
        resource_version = self._resume_point(spec, halt)
        if resource_version is None:
            return
        if resource_version:
            # Resuming: everything up to the cursor was stored before, and the backlog arrives as
            # ordinary watch events; the cursor is this source's first watermark.
            self._put(
                Item(spec.source, spec.resource, "BOOKMARK", {}, resource_version, timezone.now()), halt
            )
        flowing = False
        while not halt.is_set():
            try:
                if not resource_version:
                    resource_version = self._relist(spec, halt)
                    self._synced(spec.source)
                for event_type, obj in kube.watch_resource(
                    self.ref,
                    spec.resource,
                    resource_version=resource_version,
                    namespace=spec.namespace,
                    field_selector=spec.field_selector,
                    timeout_seconds=self.watch_timeout,
                ):
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or resource_version)
                    resource_version = rv
                    self._put(Item(spec.source, spec.resource, event_type, obj, rv, timezone.now()), halt)
                    # A resumed source is synced once its stream flows, not when its cursor was
                    # read: opening a watch can take seconds (seen: 5 s for core resources right
                    # after a take-over), and the warm-up hold must not start before the backlog.
                    if not flowing:
                        self._synced(spec.source)
                        flowing = True
                    if halt.is_set():
                        break
                self._synced(spec.source)  # the call ended: whatever backlog there was came
                delay = 0.5
            except ClusterError as exc:
                if exc.status == 410:
                    log.info("cluster %s: %s watch expired (410), relisting", self.cluster.name, spec.source)
                    resource_version = ""
                    continue
                metrics.INGEST_ERRORS.labels(source=spec.resource).inc()
                log.warning(
                    "cluster %s: %s: %s; retrying in %.1fs",
                    self.cluster.name,
                    spec.source,
                    exc.message,
                    delay,
                )
                halt.wait(delay)
                delay = min(self.backoff_max, delay * 2)

    def _synced(self, source: str) -> None:
        with self.sync_lock:
            self.unsynced.discard(source)

    def _relist(self, spec: WatchSpec, halt: threading.Event) -> str:
        items, resource_version = kube.list_resource(
            self.ref, spec.resource, namespace=spec.namespace, field_selector=spec.field_selector
        )
        now = timezone.now()
        for obj in items:
            # Listed objects do not advance the cursor: the list's own version does, below.
            self._put(Item(spec.source, spec.resource, "ADDED", obj, "", now), halt)
        self._put(Item(spec.source, spec.resource, "BOOKMARK", {}, resource_version, now), halt)
        return resource_version

    # --- ClusterD ---------------------------------------------------------------------------------
    def _clusterd_loop(self, halt: threading.Event) -> None:
        delay = 0.5
        while not halt.is_set():
            stream = FaultStream(self.cluster.clusterd_address)
            self.streams.append(stream)
            try:
                for signal in stream:
                    delay = 0.5
                    received_at = timezone.now()
                    position = self._server_position()
                    self._put(
                        Item(CLUSTERD_SOURCE, CLUSTERD_SOURCE, "SIGNAL", signal, position, received_at), halt
                    )
                    if halt.is_set():
                        break
            except ClusterDError as exc:
                metrics.INGEST_ERRORS.labels(source=CLUSTERD_SOURCE).inc()
                log.warning(
                    "cluster %s: ClusterD stream: %s; reconnecting in %.1fs",
                    self.cluster.name,
                    exc.message,
                    delay,
                )
            finally:
                stream.close()
                self.streams.remove(stream)
            # Jitter keeps many ingesters from reconnecting in step after a ClusterD restart.
            halt.wait(delay * random.uniform(0.5, 1.0))
            delay = min(self.backoff_max, delay * 2)

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

    # --- applier ----------------------------------------------------------------------------------
    def _apply_loop(self, halt: threading.Event) -> None:
        """Apply items in the order the API server wrote them: a k-way merge by resourceVersion.

        Each watch is its own HTTP stream read by its own thread, so under load one stream can
        reach us seconds after another: a PodGroup change before the Event written just before
        it. The API server's resourceVersion is one counter across resources (etcd's revision)
        and each stream is in order, so every source has a *watermark* (its newest version, raised
        by watch events and bookmarks): an item at version v is applied once every source's
        watermark is at least v, and then nothing older can still arrive. ClusterD signals carry
        the server's version at their arrival. A source that stays silent (a server sending few
        bookmarks) holds items at most ``EVENTS_INGEST_REORDER_SECONDS`` (longer while a take-over
        replays backlogs): then order is best effort and the store's de-duplication still holds.
        Before each item is chosen, everything that has arrived is taken off the queue into the
        merge, so a hold that ran out while the applier was busy never lets an item pass an older
        one still queued behind it.

        Every batch starts with a lease check; a lost lease ends the loop without applying (or
        acknowledging) anything more.
        """
        close_old_connections()
        dirty: dict[str, str] = {}
        try:
            self._merge_and_apply(halt, dirty)
            self._flush_cursors(dirty)
        except LeaseLost:
            # Cursors stay where they were: the new holder replays from them, the store de-duplicates.
            log.warning("cluster %s: the lease is gone; stopped applying", self.cluster.name)
            self.lost.set()
        finally:
            broadcast.flush(5.0)
            connection.close()

    def _merge_and_apply(self, halt: threading.Event, dirty: dict[str, str]) -> None:
        store = IngestStore(self.cluster)
        live_hold = settings.EVENTS_INGEST_REORDER_SECONDS
        warmup_hold = max(live_hold, settings.EVENTS_INGEST_WARMUP_WINDOW_SECONDS)
        sources = {spec.source for spec in watch_specs(self.cluster)}
        marks: dict[str, float] = {}
        sync_deadline = time.monotonic() + SYNC_TIMEOUT_SECONDS
        warm_until: float | None = None
        hold = warmup_hold
        held: list[tuple[float, int, int, float, Item]] = []
        newest_rv = 0.0
        counter = 0
        last_flush = last_prune = time.monotonic()

        def take(item: Item) -> None:
            nonlocal newest_rv, counter
            rv = _numeric_rv(item)
            is_signal = item.resource == CLUSTERD_SOURCE
            if rv is not None and not is_signal:
                newest_rv = max(newest_rv, rv)
                if item.resource_version:  # a listed object's version is not a stream position
                    marks[item.source] = max(marks.get(item.source, 0.0), rv)
            order = rv if rv is not None else newest_rv
            counter += 1
            # Same version: watch items first, then the signals that arrived after them.
            heapq.heappush(held, (order, int(is_signal), counter, time.monotonic(), item))

        def drain() -> bool:
            """Move everything that has arrived into the merge; True when anything did.

            While the applier is behind (a replay after a take-over, a slow database) the backlog
            must wait here, not in the queue: the merge only orders what it holds, and a full queue
            blocks the watchers, so their watermarks would stall and the hold would release a live
            ClusterD signal ahead of older watch items still waiting to get in.
            """
            took = False
            while len(held) <= MAX_HELD:
                try:
                    take(self.queue.get_nowait())
                except queue.Empty:
                    break
                took = True
            return took

        while True:
            if time.monotonic() - last_prune > PRUNE_EVERY_SECONDS:
                last_prune = time.monotonic()
                try:
                    store.prune_source_keys()
                except Exception:
                    log.exception("cluster %s: pruning handled Event keys failed", self.cluster.name)
                    close_old_connections()
            if warm_until is None or not held:
                timeout = 0.05 if warm_until is None else 0.2
            else:
                timeout = max(0.0, min(0.2, held[0][3] + hold - time.monotonic()))
            try:
                item: Item | None = self.queue.get(timeout=timeout)
            except queue.Empty:
                item = None
            stopping = halt.is_set()
            if item is not None:
                take(item)
                drain()
            now = time.monotonic()
            if warm_until is None:
                with self.sync_lock:
                    synced = not self.unsynced
                if not synced and now < sync_deadline and not stopping and len(held) <= MAX_HELD:
                    continue  # wait for every source's first batch
                warm_until = now + settings.EVENTS_INGEST_WARMUP_SECONDS
            if hold != live_hold and now > warm_until:
                hold = live_hold
            low = min((marks.get(source, -1.0) for source in sources), default=float("inf"))
            if _due(held, low, hold, now, stopping):
                if not self._lease_confirmed(halt):
                    if halt.is_set():
                        return  # stopping while the database is away: the held items are replayed
                    continue
                batch_ends = time.monotonic() + CURSOR_FLUSH_SECONDS
                while _due(held, low, hold, now, stopping):
                    if not self._apply_one(store, heapq.heappop(held)[4], dirty, halt):
                        return  # stopped while waiting for the database: not stored, not acknowledged
                    if drain():  # what arrived meanwhile may sort before the next held item
                        low = min((marks.get(source, -1.0) for source in sources), default=float("inf"))
                    if time.monotonic() > batch_ends:
                        break  # a long backlog goes in batches: cursors saved, the lease rechecked
                now = time.monotonic()
            if dirty and (item is None or now - last_flush >= CURSOR_FLUSH_SECONDS):
                self._flush_cursors(dirty)
                last_flush = now
            if stopping and item is None and not held:
                return

    def _lease_confirmed(self, halt: threading.Event) -> bool:
        """True when this process still holds the lease; False when the database cannot say (after
        a short wait); raises ``LeaseLost`` when it is gone."""
        lease = self.lease
        if lease is None:
            return True
        try:
            if lease.still_held():
                return True
        except DatabaseError as exc:
            log.warning("cluster %s: cannot check the lease: %s", self.cluster.name, exc)
            connection.close()
            halt.wait(min(1.0, self.db_retry_max))
            return False
        raise LeaseLost

    def _apply_one(
        self, store: IngestStore, item: Item, dirty: dict[str, str], halt: threading.Event
    ) -> bool:
        """Store one item and mark its cursor; False when halted before it was stored.

        A database that cannot be reached is waited for without limit (the cursor waits with
        it); any other error is retried a few times, then the item is logged and skipped, so one
        poison item cannot stall every job of the cluster.
        """
        failures = 0
        delay = 0.2
        while True:
            try:
                if item.resource == CLUSTERD_SOURCE:
                    assert isinstance(item.obj, FaultSignal)
                    store.apply_fault_signal(item.obj, item.received_at)
                elif item.event_type not in ("BOOKMARK", "ERROR"):
                    store.apply(item.resource, item.event_type, item.obj, item.received_at)
                break
            except Exception as exc:
                metrics.INGEST_ERRORS.labels(source=item.resource).inc()
                if db_unreachable(exc):
                    log.warning(
                        "cluster %s: database unreachable storing %s %s (%s); retrying in %.1fs",
                        self.cluster.name,
                        item.resource,
                        item.event_type,
                        str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__,
                        delay,
                    )
                    connection.close()
                    wait, delay = delay, min(self.db_retry_max, delay * 2)
                else:
                    failures += 1
                    log.exception(
                        "cluster %s: storing %s %s failed (attempt %d)",
                        self.cluster.name,
                        item.resource,
                        item.event_type,
                        failures,
                    )
                    close_old_connections()
                    if failures >= 5:
                        log.error(
                            "cluster %s: giving up on %s %s",
                            self.cluster.name,
                            item.resource,
                            item.event_type,
                        )
                        break
                    wait = min(5.0, 0.2 * 2 ** (failures - 1))
                if halt.wait(wait):
                    return False
                # Our session may have gone with the database: only the lease holder stores.
                while not self._lease_confirmed(halt):
                    if halt.is_set():
                        return False
        self.applied += 1
        if item.resource_version and item.resource != CLUSTERD_SOURCE:
            dirty[item.source] = item.resource_version
        return True

    def _flush_cursors(self, dirty: dict[str, str]) -> None:
        try:
            for source, rv in list(dirty.items()):
                self.save_cursor(source, rv)
                del dirty[source]
        except Exception as exc:
            log.warning(
                "cluster %s: cannot save cursors (kept for the next flush): %s", self.cluster.name, exc
            )
            if db_unreachable(exc):
                connection.close()
            else:
                close_old_connections()


def _due(
    held: list[tuple[float, int, int, float, Item]], low: float, hold: float, now: float, stopping: bool
) -> bool:
    """Whether the oldest held item may be applied: every source is past it, or it waited long enough."""
    if not held:
        return False
    order, _, _, arrived, _ = held[0]
    return order <= low or arrived + hold <= now or stopping or len(held) > MAX_HELD


def _numeric_rv(item: Item) -> float | None:
    if item.resource == CLUSTERD_SOURCE:
        return float(item.resource_version) if item.resource_version.isdigit() else None
    raw = item.resource_version or str(((item.obj or {}).get("metadata") or {}).get("resourceVersion") or "")
    return float(raw) if raw.isdigit() else None


def run_ingest(stop: threading.Event, *, cluster_names: list[str] | None = None) -> list[ClusterIngester]:
    """Start an ingester per configured cluster (or those named); returns them, running."""
    clusters = Cluster.objects.all()
    if cluster_names:
        clusters = clusters.filter(name__in=cluster_names)
    ingesters = [ClusterIngester(cluster, stop) for cluster in clusters]
    for ingester in ingesters:
        ingester.start()
    return ingesters

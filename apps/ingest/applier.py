"""The ingester's applier: store each item in the order the API server wrote it, then advance cursors.

Items come off the term's ``Feed`` into a ``ReorderBuffer``; what is due is stored one by one, and
only then does that source's ``IngestCursor`` advance, so a cursor never passes an unstored event;
after ``kill -9`` the watch resumes from the cursor and anything replayed is recognised by the store.
Before each item is chosen, everything that has arrived is taken off the queue into the buffer, so
a hold that ran out while the applier was busy never lets an item pass an older one still queued.

A database outage of any length loses nothing: a connection error is retried without limit
(capped backoff) and the item's cursor waits for it. Every batch starts with a lease check; a lost
lease ends the applier without storing (or acknowledging) anything more.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, close_old_connections, connection

from apps.clusterd.client import FaultSignal
from apps.core import metrics as core_metrics
from apps.events import broadcast, metrics
from apps.ingest import express
from apps.ingest.cursors import cursor_save
from apps.ingest.feed import Feed, SyncGate
from apps.ingest.items import BOOKMARK, LISTED, Item, Listing, sources_of
from apps.ingest.lease import ClusterLease, LeaseLost
from apps.ingest.observation import JobRef
from apps.ingest.reorder import ReorderBuffer, position_of
from apps.ingest.store import IngestStore
from apps.jobs.models import Cluster

log = logging.getLogger(__name__)

CURSOR_FLUSH_SECONDS = 0.5
SYNC_TIMEOUT_SECONDS = 15.0
PRUNE_EVERY_SECONDS = 600.0
GIVE_UP_AFTER = 5  # failures of one item (not a lost database) before it is logged and skipped


def db_unreachable(exc: BaseException) -> bool:
    """A connection-level failure (server down, session killed, pool timeout): waiting helps."""
    return isinstance(exc, OperationalError | InterfaceError)


def _count_query(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    """An execute wrapper of the applier's connection: every statement counted (what a fault costs)."""
    core_metrics.INGEST_QUERIES.inc()
    return execute(sql, params, many, context)


@dataclass(eq=False)
class Applier:
    """One term's applier for one cluster; ``run`` until the term ends or the lease is lost."""

    cluster: Cluster
    feed: Feed
    gate: SyncGate
    _: KW_ONLY
    lease: ClusterLease | None
    lost: threading.Event
    db_retry_max: float
    applied: int = field(default=0, init=False)
    expressed: int = field(default=0, init=False)  # fault reports stored on arrival (apps.ingest.express)
    # Set once the warm-up is over: a take-over's replay is merged in order, nothing skips the hold.
    live: bool = field(default=False, init=False)
    _lease_seen_at: float = field(default=0.0, init=False)
    _express_paused_until: float = field(default=0.0, init=False)
    _held_faults: express.HeldFaults = field(default_factory=express.HeldFaults, init=False)
    # source → newest stored resourceVersion, not yet saved
    dirty: dict[str, str] = field(default_factory=dict, init=False)

    @property
    def halt(self) -> threading.Event:
        return self.feed.halt

    def run(self) -> None:
        close_old_connections()
        broadcast.warm()
        try:
            with connection.execute_wrapper(_count_query):
                self._merge_and_apply(IngestStore(self.cluster))
                self.flush_cursors()
        except LeaseLost:
            # Cursors stay where they were: the new holder replays from them, the store de-duplicates.
            log.warning("cluster %s: the lease is gone; stopped applying", self.cluster.name)
            self.lost.set()
        finally:
            broadcast.flush(5.0)
            connection.close()

    def _merge_and_apply(self, store: IngestStore) -> None:
        live_hold = settings.EVENTS_INGEST_REORDER_SECONDS
        # Longer holds while a take-over replays backlogs at different speeds.
        buffer = ReorderBuffer(
            sources_of(self.cluster), max(live_hold, settings.EVENTS_INGEST_WARMUP_WINDOW_SECONDS)
        )
        sync_deadline = time.monotonic() + SYNC_TIMEOUT_SECONDS
        warm_until: float | None = None
        last_flush = last_prune = time.monotonic()
        while True:
            if time.monotonic() - last_prune > PRUNE_EVERY_SECONDS:
                last_prune = time.monotonic()
                self._prune(store)
            item = self.feed.get(self._wait(buffer, warm_until))
            stopping = self.halt.is_set()
            if item is not None:
                self._arrived(store, buffer, item)
                self._take_arrived(store, buffer)
            now = time.monotonic()
            if warm_until is None:
                if not self.gate.complete and now < sync_deadline and not stopping and not buffer.full:
                    continue  # wait for every source's first batch
                warm_until = now + settings.EVENTS_INGEST_WARMUP_SECONDS
            if now > warm_until:
                buffer.hold = live_hold
                self.live = True
            if buffer.due(now, stopping):
                if not self._lease_confirmed():
                    if self.halt.is_set():
                        return  # stopping while the database is away: the held items are replayed
                    continue
                if not self._apply_batch(store, buffer, now, stopping):
                    return  # stopped while waiting for the database: not stored, not acknowledged
                now = time.monotonic()
            if self.dirty and (item is None or now - last_flush >= CURSOR_FLUSH_SECONDS):
                self.flush_cursors()
                last_flush = now
            if stopping and item is None and not buffer:
                return

    def _wait(self, buffer: ReorderBuffer, warm_until: float | None) -> float:
        """How long to wait for the next item: until the oldest held one's hold runs out, at most 0.2 s."""
        if warm_until is None:
            return 0.05
        oldest = buffer.oldest_arrival()
        if oldest is None:
            return 0.2
        return max(0.0, min(0.2, oldest + buffer.hold - time.monotonic()))

    def _arrived(self, store: IngestStore, buffer: ReorderBuffer, item: Item) -> None:
        buffer.add(item, time.monotonic())
        ref = express.fault_report_job(item)
        if ref is None:
            return
        key = store.job_key(ref)
        # An older report of the job still held (a backlog, a slow database): the stored view of the
        # job lags it, so this one goes in order too.
        older_held = self._held_faults.older_held(key)
        self._held_faults.arrived(key, item)
        paused = time.monotonic() < self._express_paused_until
        if self.live and not older_held and not buffer.full and not paused:
            self._express(store, buffer, item, ref)

    def _express(self, store: IngestStore, buffer: ReorderBuffer, item: Item, ref: JobRef) -> None:
        """Store a job's first fault report at once when nothing older can move it (``apps.ingest.express``).

        It stays in the buffer: in order, the store recognises it and only its cursor moves. Any
        failure here is left to that in-order pass.
        """
        position = position_of(item)
        if position is None or position <= buffer.low_watermark():
            return  # due in order right away
        if not express.recent(item, settings.EVENTS_INCIDENT_LATE_SECONDS):
            return
        try:
            if not store.opens_an_incident(ref) or not self._lease_fresh():
                return
            with core_metrics.INGEST_APPLY_SECONDS.time():
                self._store(store, item)
        except LeaseLost:
            raise
        except Exception as exc:
            log.warning(
                "cluster %s: storing a fault report on arrival failed (%s); it goes in order",
                self.cluster.name,
                exc,
            )
            if db_unreachable(exc):
                # Not again for every report of a storm while the database is away: in order.
                self._express_paused_until = time.monotonic() + self.db_retry_max
                connection.close()
            else:
                close_old_connections()
            return
        self.expressed += 1
        core_metrics.INGEST_EXPRESS.inc()

    def _lease_fresh(self) -> bool:
        """The lease, checked again when the last check is older than half a second."""
        if self.lease is None or time.monotonic() - self._lease_seen_at < 0.5:
            return True
        return self._lease_confirmed()

    def _take_arrived(self, store: IngestStore, buffer: ReorderBuffer) -> bool:
        """Move everything that has arrived into the buffer; True when anything did.

        While the applier is behind (a replay after a take-over, a slow database) the backlog must
        wait here, not in the queue: the buffer only orders what it holds, and a full queue blocks
        the watchers, so their watermarks would stall and the hold would release a live ClusterD
        signal ahead of older watch items still waiting to get in.
        """
        took = False
        while not buffer.full:
            item = self.feed.get_nowait()
            if item is None:
                break
            self._arrived(store, buffer, item)
            took = True
        return took

    def _apply_batch(self, store: IngestStore, buffer: ReorderBuffer, now: float, stopping: bool) -> bool:
        """Store what is due, for at most ``CURSOR_FLUSH_SECONDS`` (a long backlog goes in batches:
        cursors saved, the lease rechecked); False when the term ended while waiting."""
        batch_ends = time.monotonic() + CURSOR_FLUSH_SECONDS
        while buffer.due(now, stopping):
            item = buffer.pop()
            if not self.apply_one(store, item):
                return False  # the term ends: the buffer (and what it counts) goes with it
            self._held_faults.left(item)
            self._take_arrived(store, buffer)  # what arrived meanwhile may sort before the next held item
            if time.monotonic() > batch_ends:
                break
        return True

    def _prune(self, store: IngestStore) -> None:
        try:
            store.prune_source_keys()
        except Exception:
            log.exception("cluster %s: pruning handled Event keys failed", self.cluster.name)
            close_old_connections()

    def _lease_confirmed(self) -> bool:
        """True when this process still holds the lease; False when the database cannot say (after
        a short wait); raises ``LeaseLost`` when it is gone."""
        if self.lease is None:
            return True
        try:
            if self.lease.still_held():
                self._lease_seen_at = time.monotonic()
                return True
        except DatabaseError as exc:
            log.warning("cluster %s: cannot check the lease: %s", self.cluster.name, exc)
            connection.close()
            self.halt.wait(min(1.0, self.db_retry_max))
            return False
        raise LeaseLost

    def _store(self, store: IngestStore, item: Item) -> None:
        if item.is_signal:
            assert isinstance(item.obj, FaultSignal)
            store.apply_fault_signal(item.obj, item.received_at)
        elif item.event_type == LISTED:
            assert isinstance(item.obj, Listing)
            store.apply_listing(item.resource, item.obj)
        elif item.event_type not in (BOOKMARK, "ERROR"):
            store.apply(item.resource, item.event_type, item.obj, item.received_at)

    def apply_one(self, store: IngestStore, item: Item) -> bool:
        """Store one item and mark its cursor; False when halted before it was stored.

        A database that cannot be reached is waited for without limit (the cursor waits with
        it); any other error is retried a few times, then the item is logged and skipped, so one
        poison item cannot stall every job of the cluster.
        """
        failures = 0
        delay = 0.2
        while True:
            try:
                with core_metrics.INGEST_APPLY_SECONDS.time():
                    self._store(store, item)
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
                    if failures >= GIVE_UP_AFTER:
                        log.error(
                            "cluster %s: giving up on %s %s",
                            self.cluster.name,
                            item.resource,
                            item.event_type,
                        )
                        break
                    wait = min(5.0, 0.2 * 2 ** (failures - 1))
                if self.halt.wait(wait):
                    return False
                # Our session may have gone with the database: only the lease holder stores.
                while not self._lease_confirmed():
                    if self.halt.is_set():
                        return False
        self.applied += 1
        core_metrics.INGEST_ITEMS.inc()
        if item.resource_version and not item.is_signal:
            self.dirty[item.source] = item.resource_version
        return True

    def flush_cursors(self) -> None:
        try:
            for source, rv in list(self.dirty.items()):
                cursor_save(self.cluster, source, rv)
                del self.dirty[source]
        except Exception as exc:
            log.warning(
                "cluster %s: cannot save cursors (kept for the next flush): %s", self.cluster.name, exc
            )
            if db_unreachable(exc):
                connection.close()
            else:
                close_old_connections()

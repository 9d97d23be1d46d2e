"""Leases: one holder per (kind, cluster) among any number of processes, and a fair share of them.

A *lease* says which process does one kind of work for one cluster: the ingester's (``ingest``:
incidents are built from the order in which a cluster's events are seen, so two appliers would
interleave them) and the decider's (``decide``: one answerer per cluster, so a second deployment is
a standby, not a second voice). It is a PostgreSQL session advisory lock keyed by two ints, the
kind's namespace and the cluster's id, held on a session of its own (a lock file on SQLite). The lock
belongs to that session, so ``kill -9`` of the holder, a cut network or ``pg_terminate_backend``
releases it at once and a standby takes it at its next poll; nothing has to expire.

The session is opened outside Django's connection pool on purpose: a pooled connection handed back
(``connection.close()`` after a crash) keeps its session, and with it a lock nobody would release.

*Members* and the *fair share*: every process that competes for a kind's leases also holds a member
lock (the kind's member namespace, its session's backend pid). The live members are then the granted
member locks of this database in ``pg_locks``, as exact as the leases themselves: a process that dies
leaves the count the moment its session ends, with no heartbeat interval to wait for, no clock to
trust and no table to prune. A process holds at most ``ceil(clusters / live members)`` leases
(:class:`FairShare`), so two processes on two clusters hold one each, and the survivor of a
``kill -9`` takes both (its quota rises with the next count, at most a poll later).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import math
import os
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from django.conf import settings
from django.db import DatabaseError, connection

from apps.core import metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseKind:
    """A kind of lease: its name (metrics label, lock-file prefix) and its two advisory namespaces."""

    name: str
    namespace: int  # first key of a cluster lease: (namespace, cluster id)
    member_namespace: int  # first key of a member lock: (member_namespace, backend pid)


# One owner of the advisory-lock key space, so two kinds can never collide.
INGEST = LeaseKind("ingest", 0x6576, 0x6D76)  # "ev" (the ingester's key since issue #16), "mv"
DECIDE = LeaseKind("decide", 0x6463, 0x6D63)  # "dc", "mc"


def _lock_dir() -> Path:
    path = Path(settings.VAR_DIR) / "leases"
    path.mkdir(parents=True, exist_ok=True)
    return path


class _Session:
    """A PostgreSQL session of its own (autocommit, not from the pool) for advisory locks."""

    def __init__(self) -> None:
        self._conn: Any = None
        self.backend_pid = 0

    def query(self, sql: str, params: list[Any]) -> tuple[Any, ...]:
        """One row of ``sql``; the session is opened on first use and again after it failed."""
        import psycopg

        try:
            if self._conn is None:
                self._conn = psycopg.connect(**connection.get_connection_params(), autocommit=True)
                self.backend_pid = int(self._conn.info.backend_pid)
            with self._conn.cursor() as cursor:
                cursor.execute(sql, params)
                row = cursor.fetchone()
                assert row is not None
                return tuple(row)
        except psycopg.Error as exc:
            self.close()  # a failed session may have lost its locks with it: never reuse it
            raise DatabaseError(str(exc)) from exc

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None
        self.backend_pid = 0


def _in_this_database() -> str:
    # pg_locks lists the advisory locks of every database of the server.
    return "database = (SELECT oid FROM pg_database WHERE datname = current_database())"


class Lease:
    """One (kind, cluster) lease, held by at most one process; ``with`` releases it."""

    def __init__(self, kind: LeaseKind, cluster_id: int, *, label: str = "") -> None:
        self.kind = kind
        self.cluster_id = cluster_id
        self.label = label or str(cluster_id)  # the metrics' ``cluster`` label (the cluster's name)
        self.held = False
        self.backend_pid = 0  # the PostgreSQL session holding the lock
        self._session = _Session()
        self._file: Any = None
        self._counted = False
        self._lost_counted = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _path(self) -> Path:
        return _lock_dir() / f"{self.kind.name}-cluster-{self.cluster_id}.lock"

    def acquire(self) -> bool:
        """Take the lease if nobody holds it; True while this object holds it. Raises
        ``DatabaseError`` when the database cannot answer."""
        if not self.held:
            self.held = self._acquire()
        if self.held and not self._counted:  # the gauge counts each lease once, however often acquired
            metrics.LEASES_HELD.labels(lease=self.kind.name, cluster=self.label).inc()
            self._counted = True
        return self.held

    def _acquire(self) -> bool:
        if connection.vendor != "postgresql":
            handle = self._path().open("a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                return False
            self._file = handle
            return True
        (held,) = self._session.query(
            "SELECT pg_try_advisory_lock(%s, %s)", [self.kind.namespace, self.cluster_id]
        )
        self.backend_pid = self._session.backend_pid
        return bool(held)

    def is_free(self) -> bool:
        """Whether nobody holds the lease now (a look, not a take)."""
        if self.held:
            return False
        if connection.vendor != "postgresql":
            with self._path().open("a") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    return False
                fcntl.flock(handle, fcntl.LOCK_UN)
                return True
        (taken,) = self._session.query(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 2 AND "
            + _in_this_database()
            + ")",
            [self.kind.namespace, self.cluster_id],
        )
        return not taken

    def still_held(self) -> bool:
        """Whether the lock's session still holds it; asked from any thread (on its own connection).

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
                [self.kind.namespace, self.cluster_id, self.backend_pid],
            )
            row = cursor.fetchone()
        if row is not None and row[0]:
            return True
        if not self._lost_counted:
            metrics.LEASE_LOSSES.labels(lease=self.kind.name, cluster=self.label).inc()
            self._lost_counted = True
        return False

    def release(self) -> None:
        """Give the lease back (a no-op when not held); the session ends with it."""
        if self._counted:
            metrics.LEASES_HELD.labels(lease=self.kind.name, cluster=self.label).dec()
            self._counted = False
        if self._file is not None:
            self._file.close()
            self._file = None
        elif self.held:
            with contextlib.suppress(DatabaseError):
                self._session.query(
                    "SELECT pg_advisory_unlock(%s, %s)", [self.kind.namespace, self.cluster_id]
                )
        self._session.close()  # the lock cannot outlive the session, whatever the unlock said
        self.held = False


class Members:
    """This process's membership among the live processes of one kind, and their count."""

    def __init__(self, kind: LeaseKind) -> None:
        self.kind = kind
        self._session = _Session()
        self._file: Any = None
        self._path: Path | None = None

    def join(self) -> None:
        """Be counted (again, after the session failed); raises ``DatabaseError`` when it cannot."""
        if connection.vendor != "postgresql":
            if self._file is None:
                self._path = (
                    _lock_dir() / f"{self.kind.name}-member-{os.getpid()}-{uuid.uuid4().hex[:8]}.lock"
                )
                handle = self._path.open("a")
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._file = handle
            return
        if self._session.backend_pid:
            return
        self._session.query(
            "SELECT pg_advisory_lock(%s, pg_backend_pid()::int)", [self.kind.member_namespace]
        )

    def count(self) -> int:
        """Live members of this kind in this database, this one included once it joined."""
        self.join()
        if connection.vendor != "postgresql":
            return self._count_files()
        (live,) = self._session.query(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid::bigint = %s"
            " AND objsubid = 2 AND " + _in_this_database(),
            [self.kind.member_namespace],
        )
        return int(live)

    def _count_files(self) -> int:
        live = 0
        for path in _lock_dir().glob(f"{self.kind.name}-member-*.lock"):
            if path == self._path:
                live += 1
                continue
            with contextlib.suppress(OSError), path.open("a") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    live += 1  # its process holds it: alive
                    continue
                path.unlink()  # a member that died: its file goes
        return live

    def leave(self) -> None:
        self._session.close()
        if self._file is not None:
            self._file.close()
            self._file = None
            if self._path is not None:
                with contextlib.suppress(OSError):
                    self._path.unlink()


# A process asks the database how many members are alive at most this often.
MEMBERS_REFRESH_SECONDS = 1.0
# Over its share, a process gives back one lease per this many seconds: the others take it (they
# poll every second) before it would give back another, so a rebalance never overshoots.
SHED_SECONDS = 3.0
# A lease nobody took for this long is taken by a process already at its share: the processes under
# their share do not want it (``--cluster`` restricts them), and a cluster must not go unwatched.
ORPHAN_SECONDS = 5.0


@dataclass
class _Held:
    taken_at: float
    orphan: bool  # taken over the share because nobody else would


class FairShare:
    """Which leases of one kind this process may take and which it should give back.

    A process holds at most ``ceil(clusters / live members)`` leases, ``clusters`` being how many it
    competes for. It takes a free lease only while under that share (or one nobody took for
    ``ORPHAN_SECONDS``, see there, which it then keeps until the count changes), and gives back its
    newest lease, one per ``SHED_SECONDS``, only while over it. Taking below the share and giving
    back above it never cross, so the holders never trade a cluster back and forth: with N processes
    and M clusters each settles at ceil(M/N) or fewer, all M held, until a process joins or leaves.
    """

    def __init__(self, kind: LeaseKind, clusters: int, *, members: Members | None = None) -> None:
        self.kind = kind
        self.clusters = clusters
        self.members = members or Members(kind)
        self._lock = threading.Lock()
        self._held: dict[int, _Held] = {}
        self._free_since: dict[int, float] = {}
        self._live = 1
        self._live_at = -math.inf
        self._last_shed = -math.inf

    # --- the count ----------------------------------------------------------------------------------
    def live(self) -> int:
        """Live members of the kind (cached for ``MEMBERS_REFRESH_SECONDS``; at least this one)."""
        now = time.monotonic()
        if now - self._live_at >= MEMBERS_REFRESH_SECONDS:
            try:
                live = max(1, self.members.count())
            except DatabaseError as exc:  # keep the last count: the leases themselves still decide
                log.warning("%s leases: cannot count the live processes: %s", self.kind.name, exc)
                live = self._live
            self._live_at = now
            if live != self._live:
                log.info("%s leases: %d live process(es), was %d", self.kind.name, live, self._live)
                for held in self._held.values():
                    held.orphan = False  # a new member may want what nobody wanted
                self._live = live
            metrics.LEASE_MEMBERS.labels(lease=self.kind.name).set(live)
        return self._live

    def quota(self) -> int:
        metrics.LEASE_CLUSTERS.labels(lease=self.kind.name).set(self.clusters)
        return max(1, math.ceil(self.clusters / self.live())) if self.clusters else 0

    @property
    def held(self) -> int:
        with self._lock:
            return len(self._held)

    # --- taking and giving back ---------------------------------------------------------------------
    def try_take(self, lease: Lease) -> bool:
        """Take ``lease`` if this process's share allows it; True when it now holds it. Raises
        ``DatabaseError`` when the database cannot answer."""
        with self._lock:
            if lease.cluster_id in self._held and lease.held:
                return True
            now = time.monotonic()
            orphan = False
            if len(self._held) >= self.quota():
                if not lease.is_free():
                    self._free_since.pop(lease.cluster_id, None)
                    return False
                since = self._free_since.setdefault(lease.cluster_id, now)
                if now - since < ORPHAN_SECONDS:
                    return False
                orphan = True
            if not lease.acquire():
                return False
            self._free_since.pop(lease.cluster_id, None)
            self._held[lease.cluster_id] = _Held(taken_at=now, orphan=orphan)
            if orphan:
                log.info(
                    "%s lease of cluster %s: taken over this process's share", self.kind.name, lease.label
                )
            return True

    def should_release(self, cluster_id: int) -> bool:
        """Whether this process should give back ``cluster_id``'s lease now (it is over its share and
        this is the lease to give back). The caller releases it and then calls :meth:`released`."""
        with self._lock:
            # What it took because nobody else would stays (until the count changes): giving it back
            # would only see it taken again, by this process or one just as full, after ORPHAN_SECONDS.
            quota = self.quota()  # first: a new count resets what was taken for nobody else
            shared = [cid for cid, held in self._held.items() if not held.orphan]
            if cluster_id not in shared or len(shared) <= quota:
                return False
            now = time.monotonic()
            if now - self._last_shed < SHED_SECONDS:
                return False
            # The newest lease goes: its caches are the coldest.
            if max(shared, key=lambda cid: self._held[cid].taken_at) != cluster_id:
                return False
            self._last_shed = now
            log.info(
                "%s leases: over this process's share; giving back cluster %s", self.kind.name, cluster_id
            )
            return True

    def released(self, cluster_id: int) -> None:
        """The lease of ``cluster_id`` is no longer held (given back, lost or stopped)."""
        with self._lock:
            self._held.pop(cluster_id, None)

    def close(self) -> None:
        self.members.leave()

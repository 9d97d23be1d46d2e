"""The cluster's lease: one active ingester per cluster, the others hot standbys."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from apps.core import metrics

LEASE_NAMESPACE = 0x6576  # first key of the two-int advisory lock: "ev"


class LeaseLost(Exception):
    """This process no longer holds the cluster's lease: stop applying, let the holder do it."""


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
        self._counted = False

    def __enter__(self) -> ClusterLease:
        return self

    def acquire(self) -> bool:
        held = self._acquire()
        if held and not self._counted:  # the gauge counts each lease once, however often acquired
            metrics.LEASES_HELD.labels(lease="ingest").inc()
            self._counted = True
        return held

    def _acquire(self) -> bool:
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
        if self._counted:
            metrics.LEASES_HELD.labels(lease="ingest").dec()
            self._counted = False
        if self._file is not None:
            self._file.close()
        elif self.held:
            with contextlib.suppress(Exception), connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LEASE_NAMESPACE, self.cluster_id])
        connection.close()  # the session (and with it any lock) ends here

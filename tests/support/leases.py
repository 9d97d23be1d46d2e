"""Who holds which lease (``apps.core.leases``), read from ``pg_locks``, and ``manage.py decide`` as a
subprocess, for the scale-out tests."""

from __future__ import annotations

from django.db import connection

from apps.core.leases import LeaseKind
from tests.support.ingest_procs import ManageProcess, cluster_args


def lease_holders(kind: LeaseKind) -> dict[int, str]:
    """Cluster id → the ``application_name`` of the session holding its ``kind`` lease (this test's
    database only: the server lists every database's advisory locks)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT l.objid::bigint, a.application_name FROM pg_locks l"
            " JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.granted AND l.classid::bigint = %s AND l.objsubid = 2"
            " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            [kind.namespace],
        )
        return {int(cluster_id): str(name) for cluster_id, name in cursor.fetchall()}


class DecideProcess(ManageProcess):
    """``python manage.py decide --processes N --cluster NAME...``."""

    command = "decide"

    def __init__(self, clusters: list[str], *, app_name: str, processes: int = 1) -> None:
        # No KUBECONFIG: the process must not register a default cluster of its own to compete for.
        args = ["--processes", str(processes), *cluster_args(clusters)]
        super().__init__(args, app_name=app_name, KUBECONFIG="")

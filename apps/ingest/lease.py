"""The cluster's ingest lease: one active ingester per cluster, the others hot standbys.

Incidents are built from the order in which a cluster's events are seen, so two processes applying
the same streams at different speeds would interleave them. Any number of ``ingest`` processes may
run; for each cluster one holds the lease (``apps.core.leases``, kind ``ingest``) and the others wait
as hot standbys, each process holding its fair share of the clusters. The lock belongs to a database
session of its own (an open file on SQLite), so ``kill -9`` releases it and a standby takes over.
"""

from __future__ import annotations

from django.db import connection

from apps.core.leases import INGEST, Lease

LEASE_NAMESPACE = INGEST.namespace  # first key of the two-int advisory lock: "ev"


class LeaseLost(Exception):
    """This process no longer holds the cluster's lease: stop applying, let the holder do it."""


class ClusterLease(Lease):
    """The ``ingest`` lease of one cluster."""

    def __init__(self, cluster_id: int, *, label: str = "") -> None:
        super().__init__(INGEST, cluster_id, label=label)

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        connection.close()  # the leader thread's own session too: the next term starts afresh

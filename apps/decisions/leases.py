"""Which clusters this ``decide`` answers for: a ``decide`` lease per cluster, a fair share of them.

Any number of ``manage.py decide`` deployments may run; for each cluster one holds its ``decide``
lease (``apps.core.leases``) and answers its questions, the others are standbys that take the lease
over at their next poll when the holder dies. Each holds at most ceil(clusters / live deciders).

Inside one ``decide --processes N``, the lease holder is the main process (:class:`DecideLeases`) and
its N children answer shards of the PodGroups of the clusters it holds (crc32 of the name, then an
ordered lane per PodGroup), so the shards and lanes stay inside a held cluster. The main process
publishes what it holds through shared memory (:class:`HeldClusters`); before it gives a lease back it
waits until every child has stopped that cluster's watchers, and a child whose main process died
(``kill -9``) stops at once, since the leases went with the main process's sessions.

Two holders at once are possible only for a moment after a lease was *lost* (its session ended while
its process lived on): the ``one_open_decision_per_job`` constraint keeps that moment to one
``Decision`` per question, whoever sees it (``decision_open``).
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from django.db import DatabaseError, connection

from apps.core.leases import DECIDE, FairShare, Lease
from apps.jobs.models import Cluster

log = logging.getLogger(__name__)

LEASE_POLL_SECONDS = 1.0
# A decider that gave a lease back waits this long before competing for it again: longer than a
# standby's poll, so the process it is meant for gets it.
LEASE_RETAKE_SECONDS = 3 * LEASE_POLL_SECONDS
# How long stopping a cluster's watchers may take (a watch read notices its stop at its next event).
STOP_SECONDS = 5.0


class Watcher(Protocol):
    """What runs for one held cluster (``apps.decisions.watcher.PodGroupWatcher``)."""

    def run(self) -> None: ...

    def stop(self) -> None: ...


class ClusterWatchers:
    """The running watchers of the clusters this process answers for, one per cluster."""

    def __init__(self, make: Callable[[Cluster], Watcher]) -> None:
        self.make = make
        self.running: dict[int, tuple[Watcher, threading.Thread]] = {}

    def start(self, cluster: Cluster) -> None:
        if cluster.pk in self.running:
            return
        watcher = self.make(cluster)
        thread = threading.Thread(target=watcher.run, daemon=True, name=f"decide-{cluster.name}")
        self.running[cluster.pk] = (watcher, thread)
        thread.start()

    def stop(self, cluster_id: int) -> None:
        """Stop ``cluster_id``'s watcher and wait for it (its lanes finish what they began)."""
        entry = self.running.pop(cluster_id, None)
        if entry is None:
            return
        watcher, thread = entry
        watcher.stop()
        thread.join(STOP_SECONDS)

    def sync(self, clusters: Iterable[Cluster]) -> None:
        """Run exactly ``clusters``' watchers: stop the others first, then start the missing."""
        wanted = {cluster.pk: cluster for cluster in clusters}
        for cluster_id in [pk for pk in self.running if pk not in wanted]:
            self.stop(cluster_id)
        for cluster in wanted.values():
            self.start(cluster)

    def stop_all(self) -> None:
        for cluster_id in list(self.running):
            self.stop(cluster_id)


class DecideLeases:
    """This process's ``decide`` leases: ``step()`` once a poll takes, checks and gives them back.

    ``taken(cluster)`` is called once a lease is held; ``released(cluster_id)`` before a lease held is
    given back (and when one was found lost): it returns once nothing of this process answers for
    that cluster any more.
    """

    def __init__(self, *, taken: Callable[[Cluster], None], released: Callable[[int], None]) -> None:
        self.taken = taken
        self.released = released
        self.share = FairShare(DECIDE, 0)
        self.leases: dict[int, Lease] = {}
        self._not_before: dict[int, float] = {}

    @property
    def held(self) -> set[int]:
        return {pk for pk, lease in self.leases.items() if lease.held}

    def step(self, clusters: list[Cluster]) -> None:
        self.share.clusters = len(clusters)
        present = {cluster.pk for cluster in clusters}
        for cluster_id in [pk for pk in self.leases if pk not in present]:
            self._give_back(cluster_id, "the cluster was removed")
        for cluster in clusters:
            lease = self.leases.get(cluster.pk)
            if lease is not None and lease.held:
                self._check(cluster, lease)
            elif time.monotonic() >= self._not_before.get(cluster.pk, -math.inf):
                self._try(cluster)

    def _try(self, cluster: Cluster) -> None:
        lease = self.leases.setdefault(cluster.pk, Lease(DECIDE, cluster.pk, label=cluster.name))
        try:
            if not self.share.try_take(lease):
                return
        except DatabaseError as exc:
            log.warning("cluster %s: cannot ask for the decide lease: %s", cluster.name, exc)
            return
        log.info("cluster %s: this process answers its platform-mode questions", cluster.name)
        self.taken(cluster)

    def _check(self, cluster: Cluster, lease: Lease) -> None:
        try:
            lost = not lease.still_held()
        except DatabaseError as exc:  # cannot tell: keep answering; the Decision rows stay one per question
            log.warning("cluster %s: cannot check the decide lease: %s", cluster.name, exc)
            connection.close()
            return
        if lost:
            self._give_back(cluster.pk, "lost the lease")
        elif self.share.should_release(cluster.pk):
            self._give_back(cluster.pk, "over this process's share")

    def _give_back(self, cluster_id: int, why: str) -> None:
        lease = self.leases.pop(cluster_id)
        if lease.held:
            log.warning("cluster %s: no longer answering (%s)", lease.label, why)
            self.released(cluster_id)  # nothing answers for it any more: only then is the lock let go
        lease.release()
        self.share.released(cluster_id)
        self._not_before[cluster_id] = time.monotonic() + LEASE_RETAKE_SECONDS

    def close(self) -> None:
        for cluster_id in list(self.leases):
            lease = self.leases.pop(cluster_id)
            if lease.held:
                self.released(cluster_id)
            lease.release()
        self.share.close()


# --- a decide process's children ---------------------------------------------------------------------
MAX_HELD = 256
CHILD_POLL_SECONDS = 0.2


class HeldClusters:
    """The clusters the main ``decide`` process holds, in shared memory for its children.

    The main process publishes a new set with a new generation; each child acknowledges the
    generation it has applied (its watchers started and stopped accordingly).
    """

    def __init__(self, children: int) -> None:
        ctx = multiprocessing.get_context("fork")
        self._ids: Any = ctx.Array("q", MAX_HELD)
        self._generation: Any = ctx.Value("q", 0)
        self._seen: Any = ctx.Array("q", children)

    def publish(self, cluster_ids: set[int]) -> int:
        if len(cluster_ids) > MAX_HELD:
            raise ValueError(f"a decide process holds at most {MAX_HELD} clusters")
        with self._ids.get_lock():
            for i in range(MAX_HELD):
                self._ids[i] = 0
            for i, pk in enumerate(sorted(cluster_ids)):
                self._ids[i] = pk
            with self._generation.get_lock():
                self._generation.value += 1
                return int(self._generation.value)

    def read(self) -> tuple[int, set[int]]:
        with self._ids.get_lock():
            return int(self._generation.value), {int(pk) for pk in self._ids if pk}

    def ack(self, child: int, generation: int) -> None:
        self._seen[child] = generation

    def wait_applied(self, generation: int, timeout: float, alive: Callable[[], bool]) -> bool:
        """Wait until every child applied ``generation`` (or died); False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(seen >= generation for seen in self._seen) or not alive():
                return True
            time.sleep(0.02)  # shared memory has no wakeup; the children apply within their poll
        return False


def follow_held(
    held: HeldClusters, child: int, watchers: ClusterWatchers, stop: threading.Event, parent_pid: int
) -> None:
    """A child's loop: run the watchers of the clusters the main process holds, until stopped or
    orphaned (the main process died, and its leases with it)."""
    seen = -1
    try:
        while not stop.wait(CHILD_POLL_SECONDS):
            if os.getppid() != parent_pid:
                log.warning("decide child %d: the main process is gone; stopping", child)
                return
            generation, ids = held.read()
            if generation == seen:
                continue
            watchers.sync(Cluster.objects.filter(pk__in=ids) if ids else [])
            connection.close()
            held.ack(child, generation)
            seen = generation
    finally:
        watchers.stop_all()

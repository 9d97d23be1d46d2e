"""apps/core/leases.py on its own: the lock, its loss, the live count and the fair share's rules.

The processes are played by objects here (each ``Lease`` and ``Members`` has a session of its own,
as another process would); tests/ingest/test_scale_out.py and tests/decisions/test_decide_scale_out.py
run real processes.
"""

from __future__ import annotations

import pytest
from django.db import connection
from prometheus_client import REGISTRY

from apps.core import leases
from apps.core.leases import DECIDE, INGEST, FairShare, Lease, Members
from tests.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


class Counted(Members):
    """Members whose count the test sets (the other processes of the fair share)."""

    def __init__(self, live: int) -> None:
        super().__init__(INGEST)
        self.live = live

    def count(self) -> int:
        return self.live


def held(cluster: str) -> float | None:
    return REGISTRY.get_sample_value("controlplane_leases_held", {"lease": "ingest", "cluster": cluster})


def losses(cluster: str) -> float | None:
    labels = {"lease": "ingest", "cluster": cluster}
    return REGISTRY.get_sample_value("controlplane_lease_losses_total", labels)


def test_one_holder_per_kind_and_cluster_and_kinds_do_not_collide() -> None:
    with Lease(INGEST, 7, label="c7") as first, Lease(INGEST, 7) as second, Lease(DECIDE, 7) as other:
        assert first.acquire() and first.acquire()  # asking again while holding it: still held
        assert not second.acquire() and not second.is_free()
        assert other.acquire()  # the decide lease of the same cluster is another lock
        assert held("c7") == 1
        first.release()
        assert held("c7") == 0
        assert second.is_free() and second.acquire()


def test_a_session_that_ends_loses_the_lease_and_counts_the_loss() -> None:
    with Lease(INGEST, 8, label="c8") as lease, Lease(INGEST, 8) as standby:
        assert lease.acquire() and lease.still_held()
        before = losses("c8")
        with connection.cursor() as cursor:  # what a failover or a cut network does to the session
            cursor.execute("SELECT pg_terminate_backend(%s)", [lease.backend_pid])
        # pg_terminate_backend signals the backend; the lock goes when it has exited.
        wait_for(lambda: not lease.still_held(), 5, "the lease gone with its session")
        assert losses("c8") == (before or 0) + 1  # counted once, however often asked
        assert not lease.still_held() and losses("c8") == (before or 0) + 1
        assert standby.acquire()  # released with the session: nothing to expire


def test_members_are_counted_while_their_session_lives() -> None:
    one, two = Members(DECIDE), Members(DECIDE)
    try:
        one.join()
        assert one.count() == 1
        two.join()
        assert one.count() == 2 and two.count() == 2
        two.leave()  # kill -9 ends the session the same way
        # The server lists the lock until the session's backend has exited, a moment after the close.
        wait_for(lambda: one.count() == 1, 5, "the member that left no longer counted")
    finally:
        one.leave()
        two.leave()


def test_the_share_takes_under_it_and_gives_back_only_over_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leases, "MEMBERS_REFRESH_SECONDS", 0.0)
    members = Counted(live=1)
    share = FairShare(INGEST, 3, members=members)
    held = [Lease(INGEST, pk) for pk in (11, 12, 13)]
    try:
        assert all(share.try_take(lease) for lease in held)  # alone: ceil(3 / 1) = 3
        assert share.quota() == 3 and not any(share.should_release(lease.cluster_id) for lease in held)
        members.live = 3  # two processes joined: ceil(3 / 3) = 1
        assert share.quota() == 1
        # Only the newest goes, and only one per SHED_SECONDS: the others take it first.
        assert [share.should_release(lease.cluster_id) for lease in held] == [False, False, True]
        held[2].release()
        share.released(13)
        assert not share.should_release(12)  # still over its share, but not yet again
        monkeypatch.setattr(leases, "SHED_SECONDS", 0.0)
        assert share.should_release(12) and not share.should_release(11)
        held[1].release()
        share.released(12)
        assert not share.should_release(11)  # at its share: it keeps what it holds
        assert not share.try_take(held[1])  # and takes nothing more while others may
    finally:
        for lease in held:
            lease.release()
        share.close()


def test_a_lease_nobody_takes_is_taken_over_the_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``--cluster`` the processes under their share may not want a cluster: after
    ``ORPHAN_SECONDS`` free, one already at its share takes it (a cluster never goes unwatched)."""
    monkeypatch.setattr(leases, "MEMBERS_REFRESH_SECONDS", 0.0)
    members = Counted(live=2)
    share = FairShare(INGEST, 2, members=members)
    mine, orphan = Lease(INGEST, 21), Lease(INGEST, 22)
    try:
        assert share.try_take(mine)
        assert not share.try_take(orphan)  # at its share (1): first seen free now
        monkeypatch.setattr(leases, "ORPHAN_SECONDS", 0.0)
        assert share.try_take(orphan)
        # Over its share now, but it keeps both: giving either back would only see it free again, and
        # taken again after ORPHAN_SECONDS, again and again.
        monkeypatch.setattr(leases, "SHED_SECONDS", 0.0)
        assert not share.should_release(21) and not share.should_release(22)
        members.live = 3  # a process joined: it may want what nobody wanted; the newest goes
        assert share.should_release(22) and not share.should_release(21)
    finally:
        mine.release()
        orphan.release()
        share.close()

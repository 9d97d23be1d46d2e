"""Issue #27 item 3: running ``ingest`` processes pick up a cluster added later and let go of one removed.

Two ``manage.py ingest`` processes (no ``--cluster``: every configured cluster) run while one cluster
exists: one holds its lease. A second cluster registered while they run (a ``Cluster`` row, as the API
or the admin writes it) is listed at the next rescan (``CLUSTER_RESCAN_SECONDS``, shortened here) and
competed for under the fair share: the process holding nothing takes it (its share is now one; the
full one takes it only if nobody did for ORPHAN_SECONDS), its job is adopted and a fault injected
there is stored as one recovered incident. A third cluster with no jobs, once held, is deleted: its
lease is given back and nobody holds it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from apps.core.leases import INGEST
from apps.events.models import IngestCursor
from apps.jobs.models import Cluster, TrainingJob
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.events import wait_all_recovered
from tests.support.ingest_procs import IngestProcess, cluster_with_jobs
from tests.support.leases import lease_holders

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow(seconds=30)]
RESCAN = "0.5"  # CLUSTER_RESCAN_SECONDS of the processes under test (10 s by default)


@pytest.fixture(scope="module")
def sim_clock_speed() -> float:
    return 20


@pytest.fixture
def two_ingesters() -> Iterator[tuple[IngestProcess, IngestProcess]]:
    # No KUBECONFIG: neither process registers a default cluster of its own to compete for.
    pair = tuple(
        IngestProcess([], app_name=name, KUBECONFIG="", CLUSTER_RESCAN_SECONDS=RESCAN)
        for name in ("rescan-a", "rescan-b")
    )
    yield pair  # type: ignore[misc]
    for process in pair:
        process.stop()


def test_a_cluster_added_while_ingesting_is_taken_by_the_fair_share_and_a_removed_one_let_go(
    sim: SimCluster, two_ingesters: tuple[IngestProcess, IngestProcess]
) -> None:
    a, b = two_ingesters
    first, _, _ = cluster_with_jobs(sim, "rescana", 1)
    a.start()
    b.start()
    wait_for(lambda: set(lease_holders(INGEST)) == {first.pk}, 20, "the first cluster held")
    holder_of_first = lease_holders(INGEST)[first.pk]

    second, namespace, (job_name,) = cluster_with_jobs(sim, "rescanb", 1)  # registered while they run
    wait_for(lambda: second.pk in lease_holders(INGEST), 20, "the new cluster's lease taken")
    # Two clusters, two processes: a share of one each, so the one holding nothing takes the new one
    # (unless it did not ask within ORPHAN_SECONDS, 5 s, on a loaded machine: then the full one does).
    holders = lease_holders(INGEST)
    assert holders[first.pk] == holder_of_first, holders
    taker = "the idle" if holders[second.pk] != holder_of_first else "the full"
    print(f"the new cluster went to {taker} process")
    wait_for(lambda: TrainingJob.objects.filter(cluster=second).count() == 1, 30, "its job adopted")
    wait_for(lambda: IngestCursor.objects.filter(cluster=second).count() >= 5, 30, "its sources watched")
    sim.inject_fault(namespace, job_name, rank=1, fault_type="uce", recovers=[True])
    assert sim.wait_idle(60)
    wait_all_recovered(second, 1, 30, lambda: a.output() + b.output())

    empty = Cluster.objects.create(
        name="rescan-empty", kubeconfig_path=sim.kubeconfig_path, namespaces=["rescan-nothing-here"]
    )
    wait_for(lambda: empty.pk in lease_holders(INGEST), 20, "the empty cluster's lease taken")
    empty.delete()
    # Each process that listed it stops its ingester of it at its next listing (the other may not have
    # listed it at all in the second it existed): the holder gives the lease back, nobody takes it.
    try:
        wait_for(
            lambda: (
                any("rescan-empty: removed" in p.output() for p in (a, b))
                and empty.pk not in lease_holders(INGEST)
            ),
            30,
            "the removed cluster's lease given back",
        )
    except AssertionError:
        pytest.fail(f"{lease_holders(INGEST)}\n{a.output()[-3000:]}\n=====\n{b.output()[-3000:]}")
    assert {first.pk, second.pk} <= set(lease_holders(INGEST))

"""``manage.py ingest`` killed with SIGKILL mid-burst and restarted, with a second ingester running
all along: nothing lost, nothing stored twice, ``seq`` gap-free per job.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from apps.events import kinds
from apps.events.models import Incident, IngestCursor, JobEvent
from apps.jobs.models import TrainingJob
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.events import assert_gap_free, dump, wait_all_recovered
from tests.support.ingest_procs import IngestProcess, cluster_with_jobs

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow(seconds=25)]
JOBS = 4
FAULTS_PER_JOB = 3


@pytest.fixture
def slow_sim() -> Iterator[SimCluster]:
    # 20x: a retry takes ~0.4 s and a burst of 12 faults lasts a few seconds: long enough to kill mid-way.
    cluster = SimCluster(clock_speed=20, seed=5)
    cluster.start()
    yield cluster
    cluster.stop()


def test_sigkill_mid_burst_loses_and_duplicates_nothing(slow_sim: SimCluster, transactional_db: None) -> None:
    cluster, namespace, names = cluster_with_jobs(slow_sim, "kill", JOBS)
    first, second = IngestProcess(cluster.name), IngestProcess(cluster.name)
    try:
        first.start()
        second.start()  # two ingesters at once: the store must serialise them per object and per job
        wait_for(lambda: TrainingJob.objects.filter(cluster=cluster).count() == JOBS, 30, "jobs adopted")
        # Every watch has listed and saved its cursor: the ingester is live on all sources.
        wait_for(lambda: IngestCursor.objects.filter(cluster=cluster).count() >= 5, 30, "all sources watched")
        # One fault per job per wave, each wave after the last one's recoveries: a fault that arrives
        # during a recovery is merged into it, as ClusterD's fault cache does (fault_recover_service.go:165,
        # controller.go:474-479), and this test counts one incident per fault.
        for wave in range(FAULTS_PER_JOB):
            for name in names:
                slow_sim.inject_fault(namespace, name, rank=1, fault_type="uce", recovers=[True])
            if wave == 0:
                wait_for(
                    lambda: (
                        JobEvent.objects.filter(job__cluster=cluster, kind=kinds.FAULT_DETECTED).count() >= 3
                    ),
                    30,
                    "burst under way",
                )
                first.kill()  # SIGKILL: no cleanup, cursors possibly behind what was stored
                stored_at_kill = JobEvent.objects.filter(job__cluster=cluster).count()
                time.sleep(0.5)
                first.start()
            assert slow_sim.wait_idle(60)
        faults = JOBS * FAULTS_PER_JOB
        wait_all_recovered(cluster, faults, 30)
        time.sleep(1.0)  # let stragglers (late copies from other sources) arrive: they must not add events
    finally:
        first.stop()
        second.stop()
    assert stored_at_kill < JobEvent.objects.filter(job__cluster=cluster).count()
    for job in TrainingJob.objects.filter(cluster=cluster):
        assert_gap_free(job)
        incidents = list(Incident.objects.filter(job=job).order_by("number"))
        assert len(incidents) == FAULTS_PER_JOB, dump(cluster)
        for incident in incidents:
            assert incident.strategies == ["retry"], incident.as_dict()
            events = JobEvent.objects.filter(job=job, seq__gte=incident.first_seq, seq__lte=incident.last_seq)
            by_kind = [e.kind for e in events if e.kind != kinds.JOB_PHASE_CHANGED]
            # Exactly one of each per fault: no loss across the kill, no duplicate from the replay.
            for kind in (kinds.FAULT_DETECTED, kinds.STRATEGY_CHOSEN, kinds.RECOVERY_SUCCEEDED):
                assert by_kind.count(kind) == 1, (kind, by_kind)
    assert IngestCursor.objects.filter(cluster=cluster).exists()

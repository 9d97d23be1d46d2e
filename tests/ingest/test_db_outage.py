"""Issue #16 item 11: the database goes away for 30 s in the middle of a burst; nothing is lost.

The outage is real as the ingester sees it: ``manage.py ingest`` (a subprocess) reaches the test
database through a ``TcpProxy`` that this test cuts for 30 s (open connections reset, new ones
refused), so its sessions, its lease lock and its pool die exactly as with a stopped server.
The shared PostgreSQL itself keeps running (other engineers' tests use it). Faults keep coming
during the outage; at the end every fault is stored exactly once and ``seq`` is gap-free.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from django.db import connection

from apps.events import kinds
from apps.events.models import Incident, IngestCursor, JobEvent
from apps.jobs.models import Cluster, TrainingJob
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.events import assert_gap_free, dump, wait_all_recovered
from tests.support.ingest_procs import INGEST_APP_NAME, IngestProcess, cluster_with_jobs
from tests.support.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow(seconds=50)]
JOBS = 3
OUTAGE_SECONDS = 30


@pytest.fixture
def slow_sim() -> Iterator[SimCluster]:
    cluster = SimCluster(clock_speed=20, seed=7)  # a retry takes ~0.4 s: a burst lasts seconds
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture
def db_proxy(transactional_db: None) -> Iterator[TcpProxy]:
    db = connection.settings_dict
    proxy = TcpProxy(db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432))
    proxy.start()
    yield proxy
    proxy.cut()
    wait_for(lambda: other_sessions() == 0, 20, "the ingester's sessions to end")


def other_sessions() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s",
            [INGEST_APP_NAME],
        )
        return int(cursor.fetchone()[0])


def faults_detected(cluster: Cluster) -> int:
    return JobEvent.objects.filter(job__cluster=cluster, kind=kinds.FAULT_DETECTED).count()


def test_thirty_second_database_outage_mid_burst_loses_nothing(
    slow_sim: SimCluster, db_proxy: TcpProxy
) -> None:
    cluster, namespace, names = cluster_with_jobs(slow_sim, "dbout", JOBS)
    ingester = IngestProcess(cluster.name, db_port=db_proxy.port, EVENTS_INGEST_DB_RETRY_MAX_SECONDS="2")
    injected = 0
    try:
        ingester.start()
        wait_for(lambda: TrainingJob.objects.filter(cluster=cluster).count() == JOBS, 30, "jobs adopted")
        wait_for(lambda: IngestCursor.objects.filter(cluster=cluster).count() >= 5, 30, "all sources watched")
        for name in names:
            slow_sim.inject_fault(namespace, name, rank=1, fault_type="uce", recovers=[True])
            injected += 1
        wait_for(lambda: faults_detected(cluster) >= 1, 30, "burst under way")
        db_proxy.cut()
        cut_at = time.monotonic()
        time.sleep(1)  # a commit already on the wire when the proxy cut may still land: count after it
        stored_at_cut = JobEvent.objects.filter(job__cluster=cluster).count()
        time.sleep(2)
        for name in names:  # more faults while the database is away
            slow_sim.inject_fault(namespace, name, rank=1, fault_type="uce", recovers=[True])
            injected += 1
        time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - cut_at)))
        assert JobEvent.objects.filter(job__cluster=cluster).count() == stored_at_cut  # nothing got through
        db_proxy.restore()
        assert slow_sim.wait_idle(60)
        wait_all_recovered(cluster, injected, 60, ingester.output)
        time.sleep(1.0)  # stragglers must not add events
    finally:
        ingester.stop()
    output = ingester.output()
    assert "database unreachable" in output or "cannot check the lease" in output  # the outage was seen
    assert "giving up" not in output, output[-3000:]
    for job in TrainingJob.objects.filter(cluster=cluster):
        assert_gap_free(job)
        incidents = list(Incident.objects.filter(job=job).order_by("number"))
        assert len(incidents) == injected // JOBS, dump(cluster)
        for incident in incidents:
            events = JobEvent.objects.filter(job=job, seq__gte=incident.first_seq, seq__lte=incident.last_seq)
            by_kind = [e.kind for e in events if e.kind != kinds.JOB_PHASE_CHANGED]
            for kind in (kinds.FAULT_DETECTED, kinds.STRATEGY_CHOSEN, kinds.RECOVERY_SUCCEEDED):
                assert by_kind.count(kind) == 1, (kind, by_kind)

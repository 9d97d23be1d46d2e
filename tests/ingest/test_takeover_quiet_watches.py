"""A take-over whose watched resources are quiet goes live without waiting for a bookmark.

A resumed watch gets the changes since its cursor first: kube-apiserver answers the call (status and
headers, flushed) before it sends any event (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/
watch.go, ``WatchServer.HandleHTTP``), so the backlog arrives from then on. The applier used to wait
for each resumed stream's first event or bookmark, and a quiet one gets a bookmark once a minute
(``cacheWatcher.nextBookmarkTime``): every take-over where one resource was quiet (a cluster without
ClusterD Events has a quiet Events stream) waited the whole sync timeout, 15 s, and every fault of the
cluster with it (the strict sustained benchmark's take-over: 9 s median added). It now starts the
warm-up once every watch was answered. And a graceful stop does not wait 5 s for each watch blocked
in a quiet call before it gives the lease back.
"""

from __future__ import annotations

import time

import pytest

from apps.events.models import IngestCursor
from apps.ingest.applier import SYNC_TIMEOUT_SECONDS
from apps.ingest.items import sources_of
from apps.ingest.runner import LEASE_POLL_SECONDS, TERM_JOIN_SECONDS, ClusterIngester
from apps.jobs.models import Cluster, TrainingJob
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.sim import create_job, make_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _ingester(cluster: Cluster, watch_timeout: int) -> ClusterIngester:
    ingester = ClusterIngester(cluster)
    ingester.watch_timeout = watch_timeout
    ingester.start()
    return ingester


def test_a_resumed_term_goes_live_without_a_bookmark(
    sim: SimCluster, kube: Kube, namespace: str, cluster_row: Cluster, private_broker: object
) -> None:
    create_job(kube, make_job("quiet", namespace=namespace))
    first = _ingester(cluster_row, watch_timeout=5)
    try:
        wait_for(lambda: TrainingJob.objects.filter(cluster=cluster_row).exists(), 30, "the job adopted")
        wait_for(lambda: first.live, 30, "the first term live")
        sources = sources_of(cluster_row)
        wait_for(
            lambda: IngestCursor.objects.filter(cluster=cluster_row).count() >= len(sources),
            30,
            "a cursor for every source",
        )
    finally:
        first.stop()
    # Resumed from the cursors, with a production watch length (60 s): nothing happens in the
    # cluster, so no stream has an event, and its first bookmark would come a minute in.
    begun = time.monotonic()
    second = _ingester(cluster_row, watch_timeout=60)
    try:
        wait_for(lambda: second.live, SYNC_TIMEOUT_SECONDS + 10, "the resumed term live")
        took = time.monotonic() - begun
    finally:
        stopping = time.monotonic()
        second.stop()
        stop_took = time.monotonic() - stopping
    assert took < SYNC_TIMEOUT_SECONDS - 5, f"went live after {took:.1f} s: waited for the sync timeout"
    # A graceful stop with its watches blocked in quiet calls: the term's threads share one wait
    # (they waited 5 s each: half a minute, the lease held all along), and the lease is free after.
    assert stop_took < TERM_JOIN_SECONDS + 2, f"stopping took {stop_took:.1f} s"
    third = _ingester(cluster_row, watch_timeout=5)
    try:
        wait_for(third.active.is_set, 2 * LEASE_POLL_SECONDS + 2, "the next ingester leading")
    finally:
        third.stop()

"""Issue #16 item 13: under a backlog the push sweep re-queues a pending row once per lease, not
once per sweep. Real parts: the database and a private redis-server as the broker (nobody consumes
it, which is the backlog); the queue's length is read from Redis itself.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from apps.jobs.models import Cluster, TrainingJob
from apps.policies.models import PolicySync
from apps.policies.reconcile import sweep_stuck_syncs
from apps.policies.services import Actor, policy_revision_create
from tests.support import RedisServer
from tests.support.cluster import purge_queues

pytestmark = [pytest.mark.django_db(transaction=True)]
ROWS = 20
SPEC = {"mindcluster_version": "26.1", "strategies": ["retry"], "pod_rescheduling": True}


def queued(broker: RedisServer) -> int:
    # Under xdist the test settings give each worker a key prefix (controlplane/settings/test.py).
    prefix = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("global_keyprefix", "")
    return int(redis.Redis.from_url(broker.url).llen(f"{prefix}push"))


@override_settings(PUSH_PENDING_GRACE_SECONDS=1, PUSH_LEASE_SECONDS=120)
def test_sweep_requeues_a_backlogged_row_once_per_lease(own_broker: RedisServer) -> None:
    broker = own_broker  # nobody consumes it
    purge_queues()
    cluster = Cluster.objects.create(name=f"c-{uuid.uuid4().hex[:6]}")
    for i in range(ROWS):
        job = TrainingJob.objects.create(
            cluster=cluster, namespace="ns", name=f"job{i}", uid=str(uuid.uuid4()), replicas={"Worker": 1}
        )
        policy_revision_create(job=job, spec=SPEC, actor=Actor(name="tester"))
    assert queued(broker) == ROWS  # one message per new revision, nobody consuming: a backlog
    PolicySync.objects.update(queued_at=timezone.now() - timedelta(minutes=5))  # all look lost
    assert len(sweep_stuck_syncs()) == ROWS
    for _ in range(5):  # the beat keeps sweeping while the backlog drains
        assert sweep_stuck_syncs() == []
    assert queued(broker) == 2 * ROWS
    # When the lease runs out with the row still pending (the message really was lost), once more.
    PolicySync.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert len(sweep_stuck_syncs()) == ROWS
    assert sweep_stuck_syncs() == []
    assert queued(broker) == 3 * ROWS
    assert set(PolicySync.objects.values_list("state", flat=True)) == {PolicySync.State.PENDING}

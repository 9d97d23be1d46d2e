"""End to end in the built-in cluster: faults injected into a job show up in its advice within seconds.

The simulated MindCluster runs over real HTTP/gRPC, the ingester adopts the job and stores incidents,
and the advice endpoint reads them through the REST API; nothing is mocked.
"""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.ingest.runner import ClusterIngester
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.events import job_row
from tests.support.sim import create_job, make_job

pytestmark = pytest.mark.django_db(transaction=True)
SECONDS = 10


def test_injected_faults_appear_in_the_advice(
    sim: SimCluster,
    kube: Kube,
    namespace: str,
    ingester: ClusterIngester,
) -> None:
    create_job(kube, make_job("advised", namespace=namespace, strategies="retry,recover,dump"))
    job = job_row(ingester.cluster, namespace, "advised")
    client = APIClient()
    client.force_authenticate(User.objects.create_superuser("root", password="pw"))

    def advice() -> dict:
        response = client.get(f"/api/v1/jobs/{job.pk}/advice/?window_days=1")
        assert response.status_code == 200, response.content
        return response.json()

    assert advice()["history"]["faults"] == 0
    started = time.monotonic()
    for _ in range(2):
        sim.inject_fault(namespace, "advised", rank=1, fault_type="uce", recovers=[True])
        assert sim.wait_idle(30)
    body = wait_for(
        lambda: (b := advice())["history"]["faults"] == 2 and b, SECONDS, "2 faults in the advice"
    )
    elapsed = time.monotonic() - started
    assert elapsed < SECONDS
    current = body["current"]
    # The job runs retry,recover,dump: ClusterD retried the UCE; the advice replays exactly that.
    assert current["per_fault_kind"]["uce"]["paths"] == {"retry": 2}, current
    # The job was adopted from the cluster: the in-effect view (design §4.4) names its revision.
    assert current["in_effect"]["source"] == "in-effect", current["in_effect"]
    assert "retry" in current["spec"]["strategies"]
    best = body["candidates"][0]
    assert best["per_fault_kind"]["uce"]["paths"] == {"retry": 2}
    named = {a["name"]: a for a in body["assumptions"]}
    assert named["window_days"]["source"] == "user"

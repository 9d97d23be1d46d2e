"""An ingester stores only the jobs of its cluster's namespaces, though one of its sources is cluster-wide.

``mindx-dl/job-reschedule-reason`` is one ConfigMap for the whole cluster: Volcano records the
reschedules of every namespace's jobs in it, keyed ``<ns>/<name>-<uid>`` (mindcluster.md §6.3; one name
and namespace for all jobs: component/ascend-for-volcano/internal/rescheduling/type.go:41-44, the
records a map by job id, ``JobRecentRescheduleRecords``). The ingester of a cluster registered with
namespaces ``[B]`` watches that ConfigMap too (``apps.ingest.items.watch_targets``); it used to adopt
the job of namespace ``A`` named there (``IngestStore.resolve_job`` fetched it from the cluster), so
its ``TrainingJob`` rows and events included a job it does not watch. Found on the test process's
shared SimCluster: after a module rescheduled a job, ``test_leader_lock`` counted three adopted jobs
instead of two, and the time spent adopting the foreign job held up a later module's first listing.
"""

from __future__ import annotations

import uuid

import pytest

from apps.events.models import JobEvent, ObservedObject
from apps.ingest.runner import ClusterIngester
from apps.jobs.models import TrainingJob
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.sim import create_job, make_job

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_reschedule_of_another_namespaces_job_is_not_adopted(
    sim: SimCluster, kube: Kube, namespace: str, ingester: ClusterIngester
) -> None:
    elsewhere = f"other-{uuid.uuid4().hex[:8]}"
    kube.ensure_namespace(elsewhere)
    job = create_job(kube, make_job("foreign", namespace=elsewhere, strategies="dump"))
    sim.inject_fault(elsewhere, "foreign", rank=1, fault_type="normal", recovers=[True])  # dump → reschedule
    assert sim.wait_idle(30)
    key = f"{elsewhere}/foreign-{job['metadata']['uid']}"
    # The ingester has read the record (its state of the ConfigMap names the job) ...
    wait_for(
        lambda: ObservedObject.objects.filter(
            cluster=ingester.cluster, kind="reschedule-reason", state__has_key=key
        ).exists(),
        15,
        "the reschedule record read by the ingester",
    )
    # ... and stored nothing about a job outside its namespaces.
    assert not TrainingJob.objects.filter(cluster=ingester.cluster, namespace=elsewhere).exists()
    assert not JobEvent.objects.filter(job__cluster=ingester.cluster).exists()

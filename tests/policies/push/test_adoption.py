"""Adoption: AscendJobs in the cluster become TrainingJobs; their recovery keys become revision 1.

The ingester is the one observer of AscendJobs: it adopts what it lists or sees change, and marks
a job deleted on its DELETED event or when a relist (after 410) no longer finds it.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml
from django.utils import timezone
from kubernetes import client as k8s

from apps.cluster import client as cluster_client
from apps.ingest.items import Listing
from apps.ingest.runner import ClusterIngester
from apps.ingest.store import IngestStore
from apps.jobs.clusters import cluster_ref
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.models import PolicyRevision, PolicySync
from mindcluster import keys as c
from simcluster.kubeapi import KubeApiEmulator
from tests.support import RedisServer, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def adopt_listing(cluster: Cluster, namespace: str) -> None:
    """What the ingester does with a (re)list of AscendJobs, in this thread: every job, then the listing."""
    store = IngestStore(cluster)
    items, _ = cluster_client.list_all_ascendjobs(cluster_ref(cluster), namespace)
    for manifest in items:
        store.apply("ascendjobs", "ADDED", manifest, timezone.now())
    present = {(m["metadata"]["namespace"], m["metadata"]["name"]) for m in items}
    store.apply_listing("ascendjobs", Listing(namespace, frozenset(present)))


def load_samples(shared_dir: Path) -> list[dict]:
    docs = []
    for path in sorted((shared_dir / "reference" / "samples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "AscendJob":
                docs.append(doc)
    return docs


def wait_marked_deleted(cluster: Cluster, name: str, timeout: float) -> None:
    wait_for(
        lambda: TrainingJob.objects.filter(cluster=cluster, name=name, deleted_at__isnull=False).exists(),
        timeout,
        f"{name} marked deleted",
    )


def test_every_loadable_sample_is_adopted_with_its_observed_policy(
    shared_dir: Path, emulator: KubeApiEmulator, kube: k8s.ApiClient
) -> None:
    namespace = f"adopt-{uuid.uuid4().hex[:6]}"
    k8s.CoreV1Api(kube).create_namespace({"metadata": {"name": namespace}})
    custom = k8s.CustomObjectsApi(kube)
    created: dict[str, dict] = {}
    refused = 0
    for index, doc in enumerate(load_samples(shared_dir)):
        doc = {**doc, "metadata": {**doc["metadata"], "namespace": namespace}}
        if not doc["metadata"].get("name"):
            refused += 1  # the real apiserver refuses an empty name too (422)
            with pytest.raises(k8s.ApiException) as caught:
                custom.create_namespaced_custom_object(
                    c.ASCENDJOB_GROUP, c.ASCENDJOB_VERSION, namespace, c.ASCENDJOB_PLURAL, doc
                )
            assert caught.value.status == 422
            continue
        doc["metadata"]["name"] = f"{doc['metadata']['name']}-{index}"
        obj = custom.create_namespaced_custom_object(
            c.ASCENDJOB_GROUP, c.ASCENDJOB_VERSION, namespace, c.ASCENDJOB_PLURAL, doc
        )
        created[obj["metadata"]["name"]] = obj
    assert created, "no sample could be loaded"
    cluster = Cluster.objects.create(
        name=f"adopt-{uuid.uuid4().hex[:6]}",
        kubeconfig_path=str(emulator.kubeconfig),  # type: ignore[attr-defined]
        namespaces=[namespace],
    )
    adopt_listing(cluster, namespace)
    jobs = {j.name: j for j in TrainingJob.objects.filter(cluster=cluster)}
    assert set(jobs) == set(created)
    for name, obj in created.items():
        job = jobs[name]
        assert job.uid == obj["metadata"]["uid"]
        assert job.framework == obj["metadata"]["labels"]["framework"]
        assert sum(job.replicas.values()) == sum(
            r.get("replicas", 1) for r in obj["spec"]["replicaSpecs"].values()
        )
        assert job.npus_per_pod > 0
        first = job.revisions.get(number=1)
        assert first.source == PolicyRevision.Source.OBSERVED
        labels = obj["metadata"].get("labels") or {}
        if labels.get("fault-scheduling") in ("grace", "force"):
            # Kept as observed, unless MindCluster itself rejects it; then the comment says why.
            assert first.spec["fault_scheduling"] == labels["fault-scheduling"] or (
                "fault_scheduling" in first.comment and "ignored" in first.comment
            )
        assert first.spec["pod_rescheduling"] == (labels.get("pod-rescheduling") == "on")
        # Observed means "already in the cluster": nothing to push.
        assert PolicySync.objects.get(job=job).state == "applied"
    # Re-adopting is idempotent: no second revision.
    adopt_listing(cluster, namespace)
    assert PolicyRevision.objects.filter(job__cluster=cluster).count() == len(created)


def test_watch_adopts_new_jobs_and_marks_deleted_ones(
    emulator: KubeApiEmulator, kube: k8s.ApiClient, private_broker: RedisServer
) -> None:
    from tests.support.cluster import create_live_job

    namespace = f"watch-{uuid.uuid4().hex[:6]}"
    cluster = Cluster.objects.create(
        name=f"w-{uuid.uuid4().hex[:6]}",
        kubeconfig_path=str(emulator.kubeconfig),  # type: ignore[attr-defined]
        namespaces=[namespace],
    )
    ingester = ClusterIngester(cluster)
    ingester.watch_timeout = 1
    create_live_job(kube, namespace, "first")
    ingester.start()
    try:
        wait_for(
            lambda: TrainingJob.objects.filter(cluster=cluster, name="first").exists(), 10, "first adopted"
        )
        create_live_job(kube, namespace, "second")
        wait_for(
            lambda: TrainingJob.objects.filter(cluster=cluster, name="second").exists(), 10, "second adopted"
        )
        k8s.CustomObjectsApi(kube).delete_namespaced_custom_object(
            c.ASCENDJOB_GROUP, c.ASCENDJOB_VERSION, namespace, c.ASCENDJOB_PLURAL, "first"
        )
        wait_marked_deleted(cluster, "first", 10)
        # History is kept: the row and its revision still exist.
        assert PolicyRevision.objects.filter(job__name="first", job__cluster=cluster).count() == 1
        # 410 Gone → relist and carry on; the relist is the only news of a job deleted meanwhile.
        ingester.stop()
        k8s.CustomObjectsApi(kube).delete_namespaced_custom_object(
            c.ASCENDJOB_GROUP, c.ASCENDJOB_VERSION, namespace, c.ASCENDJOB_PLURAL, "second"
        )
        emulator.compact()
        ingester = ClusterIngester(cluster)  # resumes from its cursors, now too old
        ingester.watch_timeout = 1
        ingester.start()
        create_live_job(kube, namespace, "third")
        wait_for(
            lambda: TrainingJob.objects.filter(cluster=cluster, name="third").exists(), 15, "third adopted"
        )
        wait_marked_deleted(cluster, "second", 15)  # by the relist
    finally:
        ingester.stop()


def test_a_relist_does_not_mark_a_registered_job_gone_before_it_was_created(
    emulator: KubeApiEmulator, kube: k8s.ApiClient
) -> None:
    """A job registered here (its manifest rendered, not applied yet) has no uid: the cluster never had
    it, so a listing without it says nothing about it. It used to be marked deleted by any (re)list
    taken before the user applied the manifest (an ingester starting, a 410): the job created a moment
    later was adopted as a new row, and the registered one's policy stayed with the deleted row."""
    namespace = f"reg-{uuid.uuid4().hex[:6]}"
    k8s.CoreV1Api(kube).create_namespace({"metadata": {"name": namespace}})
    cluster = Cluster.objects.create(
        name=f"reg-{uuid.uuid4().hex[:6]}",
        kubeconfig_path=str(emulator.kubeconfig),  # type: ignore[attr-defined]
        namespaces=[namespace],
    )
    registered = TrainingJob.objects.create(cluster=cluster, namespace=namespace, name="later")
    adopt_listing(cluster, namespace)  # the namespace is empty: the job is not applied yet
    registered.refresh_from_db()
    assert registered.deleted_at is None
    from tests.support.cluster import create_live_job

    create_live_job(kube, namespace, "later")
    adopt_listing(cluster, namespace)
    assert list(TrainingJob.objects.filter(cluster=cluster).values_list("pk", flat=True)) == [registered.pk]

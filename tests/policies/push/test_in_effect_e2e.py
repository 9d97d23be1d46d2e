"""In effect, not written — end to end in the built-in cluster (issue #13, "Prove it" (a)(b)(c)).

Real parts only: the simulated cluster over HTTP (its operator creates the PodGroup from the job, its
ClusterD answers faults), the ingester in-process, a real Celery worker for the push, the REST API.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.audit.actors import Actor
from apps.events import kinds
from apps.events.models import JobEvent
from apps.ingest.runner import ClusterIngester
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.desired import desired_state
from apps.policies.models import PolicySync
from apps.policies.services import policy_revision_create
from apps.policies.validation import validate_policy
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support import RedisServer, wait_for
from tests.support.cluster import Worker
from tests.support.sim import create_job, make_job
from tests.support.world import training_job

pytestmark = pytest.mark.django_db(transaction=True)
OLD = ["retry", "recover", "dump"]
NEW = ["dump"]


@pytest.fixture(scope="module")
def sim_kube(sim: SimCluster) -> Iterator[Kube]:
    """The root conftest's ``kube`` under another name: this package's conftest has its own ``kube``."""
    with closing(Kube(sim.kubeconfig_path)) as client:
        yield client


@pytest.fixture
def world(
    sim: SimCluster,
    sim_kube: Kube,
    broker: RedisServer,
    worker_factory: Callable[..., Worker],
) -> Iterator[dict[str, Any]]:
    namespace = f"ie-{uuid.uuid4().hex[:8]}"
    sim_kube.ensure_namespace(namespace)
    cluster = Cluster.objects.create(
        name=f"sim-{uuid.uuid4().hex[:6]}",
        kubeconfig_path=sim.kubeconfig_path,
        clusterd_address=sim.grpc_address,
        namespaces=[namespace],
    )
    worker_factory()
    ingester = ClusterIngester(cluster)
    ingester.watch_timeout = 5
    ingester.start()
    client = APIClient()
    client.force_login(User.objects.create_superuser(f"root-{uuid.uuid4().hex[:6]}", password="pw"))
    try:
        yield {"namespace": namespace, "cluster": cluster, "client": client}
    finally:
        ingester.stop()


def _in_effect(client: APIClient, job: TrainingJob) -> dict[str, Any]:
    response = client.get(f"/api/v1/jobs/{job.pk}/")
    assert response.status_code == 200, response.content
    return response.json()["in_effect"]


def _observed(client: APIClient, job: TrainingJob) -> dict[str, Any]:
    return wait_for(
        lambda: (lambda b: b if b["basis"] != "unknown" else None)(_in_effect(client, job)),
        20,
        "the job's PodGroup observed",
    )


def _put(client: APIClient, job: TrainingJob, strategies: list[str]) -> None:
    body = {"spec": {"mindcluster_version": "26.1", "strategies": strategies}}
    response = client.put(f"/api/v1/jobs/{job.pk}/policy/", body, format="json")
    assert response.status_code == 200, response.content
    revision = response.json()["revision"]
    wait_for(
        lambda: PolicySync.objects.filter(
            job=job, generation=revision, state=PolicySync.State.APPLIED
        ).exists(),
        60,
        f"revision {revision} written by the worker",
    )


def _created_with_policy(world: dict[str, Any], sim_kube: Kube) -> TrainingJob:
    """A registered job with revision 1, created in the cluster from the manifest rendered for it."""
    namespace, name = world["namespace"], f"cw-{uuid.uuid4().hex[:6]}"
    job = training_job(world["cluster"], name, namespace)
    spec = {"mindcluster_version": "26.1", "strategies": OLD}
    policy_revision_create(job=job, spec=spec, actor=Actor(name="pipeline"), push=False)
    validated = validate_policy(spec).spec
    assert validated is not None
    manifest = make_job(name, namespace=namespace, strategies=None)
    create_job(sim_kube, desired_state(manifest, validated, revision=1).manifest)
    return job


def test_a_job_created_with_a_policy_is_in_effect_created_with(world: dict[str, Any], sim_kube: Kube) -> None:
    job = _created_with_policy(world, sim_kube)
    view = _observed(world["client"], job)
    assert (view["revision"], view["basis"]) == (1, "created-with")
    assert view["pending"] == [] and view["process_recovery"]["on"] is True
    assert view["config"]["recover-strategy"] == "retry,recover,dump"


def test_b_strategies_changed_while_running_wait_for_recreate(
    world: dict[str, Any],
    sim_kube: Kube,
    sim: SimCluster,
) -> None:
    job = _created_with_policy(world, sim_kube)
    _observed(world["client"], job)
    _put(world["client"], job, NEW)
    view = _in_effect(world["client"], job)
    assert (view["revision"], view["basis"]) == (1, "created-with")
    recreate = [p for p in view["pending"] if p["waits_for"] == "recreate"]
    assert recreate == [
        {"revision": 2, "keys": ["recover-strategy"], "waits_for": "recreate", "written": True}
    ]
    policy = world["client"].get(f"/api/v1/jobs/{job.pk}/policy/").json()
    assert policy["sync"]["state"] == "applied" and policy["in_effect"]["revision"] == 1

    # The next fault still follows the config the job was created with (ClusterD's Init snapshot).
    sim.inject_fault(job.namespace, job.name, rank=1, fault_type="uce", recovers=[True])
    assert sim.wait_idle(30)
    chosen = wait_for(
        lambda: JobEvent.objects.filter(job=job, kind=kinds.STRATEGY_CHOSEN).order_by("seq").first(),
        20,
        "the strategy ClusterD chose",
    )
    assert chosen.data["strategy"] == "retry"


def _refused_init_read_the_push(sim: SimCluster, sim_kube: Kube, job: TrainingJob) -> None:
    """Wait until ClusterD's retried, refused Init has read the pushed PodGroup and the ingester has
    seen its Event: the race that made this test intermittent, now waited for on purpose.

    TaskD calls Init again a second after a refusal, endlessly
    (component/taskd/taskd/go/framework_backend/manager/manager.go:468-492), and a refused Init keeps
    nothing (component/clusterd/pkg/application/recover/fault_recover_service.go:579-585), so the retry
    reads the PodGroup with our recover-strategy on it and is refused again (no
    process-recover-enable=on, :550-555). A Warning Event written after it on the AscendJob is a
    barrier: the ingester reads one Event watch in resourceVersion order.
    """
    uid = TrainingJob.objects.get(pk=job.pk).uid
    wait_for(
        lambda: (lambda r: r is not None and r.code == 403 and "recover" in r.policy.configured)(
            sim.clusterd.init_record(uid)
        ),
        20,
        "the retried Init refused with the pushed recover-strategy read",
    )
    manifest = sim_kube.get_job(job.namespace, job.name)
    assert manifest is not None
    marker = f"barrier-{uuid.uuid4().hex[:6]}"
    sim_kube.event(manifest, "InEffectTestBarrier", marker, type_="Warning", component="test")
    wait_for(
        lambda: JobEvent.objects.filter(job=job, kind=kinds.JOB_WARNING, message=marker).exists(),
        20,
        "the ingester past the refused Init's Event",
    )


def test_c_adopted_without_recover_strategy_shows_process_level_recovery_off(
    world: dict[str, Any], sim_kube: Kube, sim: SimCluster
) -> None:
    namespace, name = world["namespace"], f"ad-{uuid.uuid4().hex[:6]}"
    create_job(sim_kube, make_job(name, namespace=namespace, strategies=None))
    job = wait_for(
        lambda: TrainingJob.objects.filter(cluster=world["cluster"], namespace=namespace, name=name).first(),
        20,
        "the job adopted",
    )
    view = _observed(world["client"], job)
    assert (view["revision"], view["basis"]) == (1, "observed")
    assert view["process_recovery"]["on"] is False
    _put(world["client"], job, ["recover", "dump"])
    _refused_init_read_the_push(sim, sim_kube, job)
    # A refused Init is no snapshot: the view stays on the PodGroup the job was created with.
    view = _in_effect(world["client"], job)
    assert view["revision"] == 1 and view["process_recovery"]["on"] is False
    assert view["observed_from"] == "podgroup-at-creation"
    assert "process-level recovery is off until the job is recreated" in view["process_recovery"]["reason"]
    recreate = next(p for p in view["pending"] if p["waits_for"] == "recreate")
    assert recreate["written"] is True and "recover-strategy" in recreate["keys"]
    # The jobs list says the same: waiting for a recreation, process-level recovery off.
    summary = world["client"].get("/ui/jobs.json")
    assert summary.status_code == 200, summary.content
    row = {r["id"]: r for r in summary.json()["results"]}[job.pk]
    assert row["in_effect"]["state"] == "waiting" and row["in_effect"]["process_recovery"] is False

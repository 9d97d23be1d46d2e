"""Shared pieces of the platform-mode end-to-end tests: a simulated cluster, jobs created from a
rendered platform-mode policy, and the decider's PodGroup watchers running in threads.

``sim`` is the test process's shared SimCluster at this module's ``sim_clock_speed``; a test module may
set another speed, or define its own ``sim`` (a cluster of its own) and the other fixtures use it.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from apps.audit.actors import Actor
from apps.decisions.models import Decision
from apps.decisions.watcher import PodGroupWatcher
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.rendering import render
from apps.policies.services import policy_revision_create
from apps.policies.validation import validate_policy
from mindcluster import keys as c
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.cluster import BASE_JOB, Worker

POLICY: dict[str, Any] = {
    "mindcluster_version": "26.1",
    "strategies": ["retry", "recover", "dump"],
    "pod_rescheduling": True,
    "platform_mode": True,
    "decision_rules": [
        {"match": {"fault_type": ["uce", "hccl"]}, "strategy": "retry"},
        {"match": {"fault_type": ["node"]}, "strategy": "dump"},
        {"match": {"fault_type": ["normal"], "rank0": True}, "strategy": "ask"},
        {"match": {"fault_type": ["normal"]}, "strategy": "recover"},
    ],
    "default_strategy": "recover",
    "decision_timeout_s": 3,
}


@pytest.fixture(scope="module")
def sim_clock_speed() -> float:
    # The shared SimCluster at 50x: 1 simulated s = 20 ms, ClusterD's 3 s poll 60 ms, its 300 s limit 6 s.
    return 50


def _job_maker(sim: SimCluster) -> Callable[..., TrainingJob]:
    """Jobs created in ``sim`` from the rendered platform-mode policy (``POLICY`` unless given), on a
    Cluster row of their own, returned once they run."""
    api = k8s_config.new_client_from_config(config_file=sim.kubeconfig_path)
    # ClusterD's gRPC address: the decider asks ClusterD's fault service for codes and levels, which
    # reset.json does not carry (utils.go:231-269, facts D12).
    cluster = Cluster.objects.create(
        name=f"sim-{uuid.uuid4().hex[:6]}",
        kubeconfig_path=sim.kubeconfig_path,
        clusterd_address=sim.grpc_address,
    )

    def make(policy: dict[str, Any] | None = None) -> TrainingJob:
        spec_raw = policy or POLICY
        spec = validate_policy(spec_raw).spec
        assert spec is not None
        name = f"plat-{uuid.uuid4().hex[:6]}"
        manifest = copy.deepcopy(BASE_JOB)
        manifest["metadata"].update({"name": name, "namespace": "default"})
        # The simulated ClusterD runs these jobs as v7.3: from v26.0 a hardware fault in platform
        # mode first gets preExitProcess and retry is never "supported" then (source facts D5,
        # fault_recover_service.go:181-187; tests/conformance plat-retry-v26-pre-exit), so the step
        # retry these handshake tests answer with is a v7.x path.
        manifest["metadata"]["labels"] = {**manifest["metadata"].get("labels", {}), c.LABEL_RELEASE: "7.3"}
        manifest["spec"]["replicaSpecs"]["Worker"]["replicas"] = 3
        rendered = render(manifest, spec)
        custom = k8s.CustomObjectsApi(api)
        live = custom.create_namespaced_custom_object(
            c.ASCENDJOB_GROUP, c.ASCENDJOB_VERSION, "default", c.ASCENDJOB_PLURAL, rendered.manifest
        )
        if rendered.configmap:
            k8s.CoreV1Api(api).create_namespaced_config_map("default", rendered.configmap)
        job = TrainingJob.objects.create(
            cluster=cluster,
            namespace="default",
            name=name,
            uid=live["metadata"]["uid"],
            replicas={"Master": 1, "Worker": 3},
            npus_per_pod=8,
        )
        # The job was created with the rendered keys: record the policy as already applied.
        policy_revision_create(job=job, spec=spec_raw, actor=Actor(name="tester"), push=False)
        wait_for(lambda: _running(custom, name), 20, f"{name} running")
        return job

    return make


def _running(custom: k8s.CustomObjectsApi, name: str) -> bool:
    job = custom.get_namespaced_custom_object(
        c.ASCENDJOB_GROUP, c.ASCENDJOB_VERSION, "default", c.ASCENDJOB_PLURAL, name
    )
    conditions = (job.get("status") or {}).get("conditions") or []
    return bool(conditions) and conditions[-1].get("type") == "Running"


@contextmanager
def _decider() -> Iterator[Callable[[], None]]:
    """The PodGroup watcher of ``manage.py decide``, in threads; call it once the jobs exist."""
    watchers: list[PodGroupWatcher] = []
    threads: list[threading.Thread] = []

    def start() -> None:
        for cluster in Cluster.objects.exclude(name__in=[w.cluster.name for w in watchers]):
            watcher = PodGroupWatcher(cluster, watch_timeout=5)
            watchers.append(watcher)
            thread = threading.Thread(target=watcher.run, daemon=True)
            threads.append(thread)
            thread.start()

    try:
        yield start
    finally:
        for watcher in watchers:
            watcher.stop()
        for thread in threads:
            thread.join(10)


@dataclass(frozen=True)
class Platform:
    """What a platform-mode test drives: ``job()`` creates a running job from the rendered policy,
    ``decide()`` starts the decider's watchers (once the jobs exist), ``start_worker()`` the Celery
    worker that writes the answers."""

    job: Callable[..., TrainingJob]
    decide: Callable[[], None]
    start_worker: Callable[..., Worker]

    def running_job(self, policy: dict[str, Any] | None = None) -> TrainingJob:
        """The usual start: the worker, one job from ``policy`` (``POLICY``), then the decider."""
        self.start_worker()
        job = self.job(policy)
        self.decide()
        return job


@pytest.fixture
def platform(sim: SimCluster, worker_factory: Callable[..., Worker]) -> Iterator[Platform]:
    # worker_factory's broker fixture purges the queues: no task of an earlier test reaches this one.
    with _decider() as decide:
        yield Platform(job=_job_maker(sim), decide=decide, start_worker=worker_factory)


def decision_for(job: TrainingJob, states: set[str], timeout: float = 20) -> Decision:
    return wait_for(
        lambda: Decision.objects.filter(job=job, state__in=states).order_by("-id").first(),
        timeout,
        f"a {states} decision for {job.name}",
    )


def decision_after_fault(
    sim: SimCluster, job: TrainingJob, states: set[str], *, rank: int, fault_type: str
) -> Decision:
    """Inject a recovering ``fault_type`` fault at ``rank`` of ``job``; its decision once in ``states``."""
    sim.inject_fault("default", job.name, rank=rank, fault_type=fault_type, recovers=True)
    return decision_for(job, states)


def podgroup_of(sim: SimCluster, job: TrainingJob) -> dict[str, Any]:
    api = k8s_config.new_client_from_config(config_file=sim.kubeconfig_path)
    return k8s.CustomObjectsApi(api).get_namespaced_custom_object(
        c.PODGROUP_GROUP, c.PODGROUP_VERSION, job.namespace, c.PODGROUP_PLURAL, f"{job.name}-{job.uid}"
    )


def annotate_podgroup(sim: SimCluster, job: TrainingJob, annotations: dict[str, str]) -> None:
    """Merge ``annotations`` into the job's PodGroup, as another writer (an older render, a crashed
    decider) would have left them."""
    api = k8s_config.new_client_from_config(config_file=sim.kubeconfig_path)
    k8s.CustomObjectsApi(api).patch_namespaced_custom_object(
        c.PODGROUP_GROUP,
        c.PODGROUP_VERSION,
        job.namespace,
        c.PODGROUP_PLURAL,
        f"{job.name}-{job.uid}",
        {"metadata": {"annotations": annotations}},
    )


# ClusterD's Event reasons for a platform answer it gave up on (508/509 paths).
GAVE_UP = {
    "WaitPlatStrategyTimeout",
    "ConfirmFaultNotCleared",
    "WaitProcessResultFaultTimeout",
    "PlatformStrategyInvalid",
}


def clusterd_reasons(sim: SimCluster, job: TrainingJob) -> list[str]:
    """The reasons of ClusterD's Events about ``job``, in write order."""
    api = k8s_config.new_client_from_config(config_file=sim.kubeconfig_path)
    events = k8s.CoreV1Api(api).list_namespaced_event(job.namespace).items
    mine = [e for e in events if e.involved_object.name == job.name and e.source.component == "clusterd"]
    mine.sort(key=lambda e: int(e.metadata.resource_version))  # write order (timestamps are whole seconds)
    return [e.reason for e in mine]

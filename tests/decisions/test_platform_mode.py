"""Platform mode end to end: the simulated ClusterD asks, the control plane answers.

Real parts only: the simulated cluster (API emulator + operator + ClusterD + TaskD) over HTTP, the
PodGroup watcher, a real Celery worker writing the answers, PostgreSQL and a private Redis.
"""

from __future__ import annotations

import copy
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from apps.audit.models import AuditEntry
from apps.cluster import constants as c
from apps.decisions.models import Decision
from apps.decisions.services import decision_answer, decisions_sweep
from apps.decisions.watcher import PodGroupWatcher
from apps.events.models import JobEvent
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.rendering import render
from apps.policies.services import Actor, policy_revision_create
from apps.policies.validation import validate_policy
from apps.simcluster.runtime import SimCluster
from tests.push.conftest import BASE_JOB, RedisServer, Worker, purge_queues, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

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
def sim() -> Iterator[SimCluster]:
    # 1 simulated second = 20 ms: ClusterD's 3 s poll is 60 ms, its 300 s limit 6 s.
    cluster = SimCluster(clock_speed=50, seed=7).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def platform_job(sim: SimCluster) -> Callable[..., TrainingJob]:
    api = k8s_config.new_client_from_config(config_file=sim.kubeconfig_path)
    cluster = Cluster.objects.create(name=f"sim-{uuid.uuid4().hex[:6]}", kubeconfig_path=sim.kubeconfig_path)

    def make(policy: dict[str, Any] | None = None) -> TrainingJob:
        spec_raw = policy or POLICY
        spec = validate_policy(spec_raw).spec
        assert spec is not None
        name = f"plat-{uuid.uuid4().hex[:6]}"
        manifest = copy.deepcopy(BASE_JOB)
        manifest["metadata"].update({"name": name, "namespace": "default"})
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


@pytest.fixture
def decider(sim: SimCluster) -> Iterator[Callable[[], None]]:
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

    yield start
    for watcher in watchers:
        watcher.stop()
    for thread in threads:
        thread.join(10)


@pytest.fixture(autouse=True)
def _clean(broker: RedisServer) -> None:
    purge_queues()


def decision_for(job: TrainingJob, states: set[str], timeout: float = 20) -> Decision:
    return wait_for(
        lambda: Decision.objects.filter(job=job, state__in=states).order_by("-id").first(),
        timeout,
        f"a {states} decision for {job.name}",
    )


@pytest.mark.parametrize(
    ("fault_type", "rank", "strategy", "decided_by"),
    [
        ("uce", 1, "retry", "rule:0"),
        ("hccl", 1, "retry", "rule:0"),
        ("node", 2, "dump", "rule:1"),
        ("normal", 1, "recover", "rule:3"),
    ],
)
def test_rule_based_decision_for_each_fault_type(
    sim: SimCluster,
    platform_job: Callable[..., TrainingJob],
    decider: Callable[[], None],
    worker_factory: Callable[..., Worker],
    fault_type: str,
    rank: int,
    strategy: str,
    decided_by: str,
) -> None:
    worker_factory()
    job = platform_job()
    decider()
    sim.inject_fault("default", job.name, rank=rank, fault_type=fault_type, recovers=True)
    decision = decision_for(job, {"completed"})
    assert decision.strategy == strategy
    assert decision.decided_by == decided_by
    assert decision.outcome  # ClusterD reported the outcome (e.g. retry-success)
    assert decision.latency_ms is not None and decision.latency_ms < 5_000
    kinds = list(JobEvent.objects.filter(job=job, source="decision").values_list("kind", flat=True))
    assert kinds[:2] == ["decision.requested", "decision.answered"] and "decision.completed" in kinds
    assert AuditEntry.objects.filter(action="decision.open", object_id=str(decision.pk)).exists()
    # Keys cleared so ClusterD can confirm the next fault; platform mode itself stays on.
    pg = _podgroup(sim, job)
    annotations = pg["metadata"]["annotations"]
    wait_for(
        lambda: not _podgroup(sim, job)["metadata"]["annotations"].get(c.ANNOTATION_CONFIRM_FAULT),
        10,
        "ProcessConfirmFault cleared",
    )
    assert c.ANNOTATION_PLATFORM_STRATEGY in annotations


def _podgroup(sim: SimCluster, job: TrainingJob) -> dict[str, Any]:
    api = k8s_config.new_client_from_config(config_file=sim.kubeconfig_path)
    return k8s.CustomObjectsApi(api).get_namespaced_custom_object(
        c.PODGROUP_GROUP, c.PODGROUP_VERSION, job.namespace, c.PODGROUP_PLURAL, f"{job.name}-{job.uid}"
    )


def test_a_person_answers_in_the_inbox_before_the_deadline(
    sim: SimCluster,
    platform_job: Callable[..., TrainingJob],
    decider: Callable[[], None],
    worker_factory: Callable[..., Worker],
) -> None:
    worker_factory()
    operator = User.objects.create_user("oncall")
    job = platform_job({**POLICY, "decision_timeout_s": 60})
    decider()
    sim.inject_fault("default", job.name, rank=0, fault_type="normal", recovers=True)  # global rank 0 → ask
    pending = decision_for(job, {"pending"})
    assert pending.deadline_at is not None
    wait_for(lambda: JobEvent.objects.filter(job=job, kind="decision.requested").exists(), 5, "the event")
    decision_answer(decision_id=pending.pk, strategy="dump", user=operator)
    done = decision_for(job, {"completed"})
    assert done.strategy == "dump" and done.decided_by == "user:oncall"
    assert AuditEntry.objects.filter(action="decision.answer", actor=operator).exists()


def test_no_answer_means_the_default_at_the_deadline_and_clusterd_proceeds(
    sim: SimCluster,
    platform_job: Callable[..., TrainingJob],
    decider: Callable[[], None],
    worker_factory: Callable[..., Worker],
) -> None:
    worker_factory()
    job = platform_job()  # decision_timeout_s = 3, well inside ClusterD's 300 s (6 s here)
    decider()
    sim.inject_fault("default", job.name, rank=0, fault_type="normal", recovers=True)
    pending = decision_for(job, {"pending"})
    done = decision_for(job, {"completed"}, timeout=30)
    assert done.pk == pending.pk
    assert done.strategy == "recover" and done.decided_by == "default:deadline"
    assert done.outcome.startswith("recover")


def test_two_jobs_faulting_at_once_get_independent_decisions(
    sim: SimCluster,
    platform_job: Callable[..., TrainingJob],
    decider: Callable[[], None],
    worker_factory: Callable[..., Worker],
) -> None:
    worker_factory()
    first, second = platform_job(), platform_job()
    decider()
    sim.inject_fault("default", first.name, rank=1, fault_type="uce", recovers=True)
    sim.inject_fault("default", second.name, rank=2, fault_type="node", recovers=True)
    a = decision_for(first, {"completed"})
    b = decision_for(second, {"completed"})
    assert (a.strategy, b.strategy) == ("retry", "dump")
    assert a.faults != b.faults


def test_a_decision_survives_a_restart_of_the_worker(
    sim: SimCluster,
    platform_job: Callable[..., TrainingJob],
    decider: Callable[[], None],
    worker_factory: Callable[..., Worker],
) -> None:
    worker = worker_factory()
    job = platform_job()
    decider()
    sim.inject_fault("default", job.name, rank=0, fault_type="normal", recovers=True)
    pending = decision_for(job, {"pending"})
    assert worker.proc is not None
    os.killpg(worker.proc.pid, signal.SIGKILL)  # the countdown message it held is gone with it
    worker.proc.wait(10)
    worker.proc = None
    worker_factory()  # a new worker process
    time.sleep(max(0.0, (pending.deadline_at.timestamp() - time.time())) + 0.2)  # type: ignore[union-attr]
    decisions_sweep()  # what beat runs every few seconds
    done = decision_for(job, {"completed"}, timeout=30)
    assert done.pk == pending.pk and done.decided_by == "default:deadline"

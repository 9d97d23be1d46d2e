"""The write path end to end: outbox → real Celery worker → official client → API emulator.

Each test follows one "Prove it" line of the push-pipeline issue.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import pytest
from django.test import override_settings
from kubernetes import client as k8s

from apps.audit.actors import Actor
from apps.events.models import JobEvent
from apps.jobs.models import TrainingJob
from apps.policies.models import PolicySync
from apps.policies.reconcile import reconcile_all, sweep_stuck_syncs
from apps.policies.rendering import render
from apps.policies.services import policy_revision_create
from apps.policies.validation import validate_policy
from mindcluster import keys as c
from simcluster.kubeapi import KubeApiEmulator
from tests.support import RedisServer, wait_for
from tests.support.cluster import Worker, purge_queues, read_live

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow(seconds=6)]

SPEC = {"mindcluster_version": "26.1", "strategies": ["dump", "retry", "recover"], "pod_rescheduling": True}


def save(job: TrainingJob, spec: dict | None = None) -> PolicySync:
    revision = policy_revision_create(job=job, spec=spec or SPEC, actor=Actor(name="tester"))
    return PolicySync.objects.get(revision=revision)


def wait_state(sync: PolicySync, states: set[str], timeout: float = 30) -> PolicySync:
    def done() -> PolicySync | None:
        sync.refresh_from_db()
        return sync if sync.state in states else None

    return wait_for(done, timeout, f"sync {sync.pk} to reach {states} (now {sync.state}: {sync.last_error})")


def applied_in_platform_mode(job: TrainingJob, kube: k8s.ApiClient) -> tuple[PolicySync, dict]:
    """``SPEC`` in platform mode saved and applied; its sync and the live PodGroup it was applied to."""
    sync = wait_state(save(job, {**SPEC, "platform_mode": True}), {"applied"})
    _, pg = read_live(kube, job)
    return sync, pg


def committed_writes(emulator: KubeApiEmulator, job: TrainingJob, plural: str) -> int:
    """Successful writes by the control plane (the test's own creation of the job is a POST)."""
    verb = None if plural == "configmaps" else "PATCH"
    return emulator.faults.committed.count(verb=verb, plural=plural, namespace=job.namespace)


@pytest.fixture(autouse=True)
def _clean_queues(broker: RedisServer) -> None:
    purge_queues()


@pytest.fixture
def job(live_job: Callable[..., TrainingJob], worker_factory: Callable[..., Worker]) -> TrainingJob:
    """A live job, a worker already running to take its pushes (what most tests here start from)."""
    worker_factory()
    return live_job()


def test_save_reaches_cluster_with_exactly_the_rendered_keys(
    job: TrainingJob,
    kube: k8s.ApiClient,
    emulator: KubeApiEmulator,
) -> None:
    sync = wait_state(save(job), {"applied"})
    live, pg = read_live(kube, job)
    expected = render(live, validate_policy(SPEC).spec)  # type: ignore[arg-type]
    annotations = live["metadata"]["annotations"]
    assert annotations[c.ANNOTATION_RECOVER_STRATEGY] == "retry,recover,dump"
    assert annotations[c.ANNOTATION_POLICY_REVISION] == "1"
    assert annotations["owner.example.com/contact"] == "ml-team"  # a key we do not own survives
    assert live["metadata"]["labels"]["team"] == "llm"
    for key, value in expected.labels.items():
        assert live["metadata"]["labels"][key] == value
    for key, value in (expected.podgroup_patch["metadata"].get("annotations") or {}).items():
        assert pg["metadata"]["annotations"].get(key) == value
    for key, value in (expected.podgroup_patch["metadata"].get("labels") or {}).items():
        assert pg["metadata"]["labels"].get(key) == value
    container = live["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert {"name": "USER_SETTING", "value": "keep-me"} in container["env"]
    assert any(p.get("name") == "taskd-port" for p in container["ports"])
    cm = k8s.CoreV1Api(kube).read_namespaced_config_map(f"taskd-manager-{job.name}", job.namespace)
    assert "init_taskd_manager" in cm.data["manager.py"]
    assert sync.applied_resource_versions["ascendjob"] == live["metadata"]["resourceVersion"]
    assert {e["when"] for e in sync.effects} >= {"live", "recreate", "pod-restart"}
    assert JobEvent.objects.filter(job=job, kind="policy.applied").count() == 1
    # Idempotent: pushing the same revision again writes nothing.
    before = emulator.faults.committed.count(namespace=job.namespace)
    from apps.policies.syncs import sync_request_apply

    wait_state(sync_request_apply(job=job), {"applied"})
    assert emulator.faults.committed.count(namespace=job.namespace) == before


def test_three_conflicts_then_applied_with_one_write_per_object(
    job: TrainingJob,
    emulator: KubeApiEmulator,
) -> None:
    emulator.faults.conflict_next_writes(3)
    sync = wait_state(save(job), {"applied"})
    assert sync.attempts == 3
    assert committed_writes(emulator, job, "ascendjobs") == 1
    assert committed_writes(emulator, job, "podgroups") == 1
    assert committed_writes(emulator, job, "configmaps") == 1


def test_503_window_then_applied_soon_after_recovery(job: TrainingJob, emulator: KubeApiEmulator) -> None:
    # Long against the worker's backoff (at most 1 s, tests/support/cluster.py: several attempts fail)
    # and short against its 60 s budget (the push must not give up): what the test is about. Seconds
    # beyond that only add waiting.
    window = 5.0
    emulator.faults.unavailable_for(window)
    started = time.monotonic()
    sync = wait_state(save(job), {"applied", "failed"}, timeout=window + 30)
    recovered_after = time.monotonic() - started - window
    assert sync.state == "applied", sync.last_error
    assert recovered_after < 30, f"applied {recovered_after:.1f}s after the API recovered"
    assert sync.attempts >= 3


def test_429_retry_after_is_honoured(job: TrainingJob, emulator: KubeApiEmulator) -> None:
    emulator.faults.throttle_next(1, retry_after=2)
    started = time.monotonic()
    sync = wait_state(save(job), {"applied"})
    assert time.monotonic() - started >= 2.0  # waited as told, not the 0.05 s base backoff
    assert sync.attempts == 1  # one throttled attempt, then success


def test_worker_killed_mid_push_is_redelivered_once(
    live_job: Callable[..., TrainingJob],
    worker_factory: Callable[..., Worker],
    emulator: KubeApiEmulator,
) -> None:
    worker = worker_factory(private=True)  # its child is killed: a process of this test's own
    job = live_job()
    emulator.faults.slow(3.0, count=1)  # the push's first request (its read of the job) hangs 3 s
    sync = save(job)
    wait_state(sync, {"applying"})
    time.sleep(0.5)  # inside the slow read: nothing written yet
    for pid in worker.child_pids():
        os.kill(pid, signal.SIGKILL)
    sync = wait_state(sync, {"applied"}, timeout=60)
    assert committed_writes(emulator, job, "ascendjobs") == 1
    assert "WorkerLostError" in worker.output() or "SIGKILL" in worker.output()


def test_broker_restart_loses_the_message_and_the_sweep_recovers_it(
    own_broker: RedisServer,
    live_job: Callable[..., TrainingJob],
    worker_factory: Callable[..., Worker],
) -> None:
    job = live_job()
    sync = save(job)  # queued while no worker runs
    own_broker.stop()  # no persistence: the queued message is gone, like a crash
    own_broker.start()
    worker_factory()
    time.sleep(1)
    sync.refresh_from_db()
    assert sync.state == "pending"
    with override_settings(PUSH_PENDING_GRACE_SECONDS=0):
        assert sync.pk in sweep_stuck_syncs()
    wait_state(sync, {"applied"})


def test_hand_edit_is_drift_with_the_keys_and_is_healed_when_asked(
    job: TrainingJob,
    kube: k8s.ApiClient,
) -> None:
    sync = wait_state(save(job), {"applied"})
    custom = k8s.CustomObjectsApi(kube)
    custom.patch_namespaced_custom_object(
        c.ASCENDJOB_GROUP,
        c.ASCENDJOB_VERSION,
        job.namespace,
        c.ASCENDJOB_PLURAL,
        job.name,
        {"metadata": {"annotations": {c.ANNOTATION_RECOVER_STRATEGY: "retry"}}},
        _content_type="application/merge-patch+json",
    )
    reconcile_all()
    sync.refresh_from_db()
    assert sync.state == "drifted"
    keys = {(d["object"], d["key"]) for d in sync.drift}
    assert ("AscendJob", f"metadata.annotations.{c.ANNOTATION_RECOVER_STRATEGY}") in keys
    assert JobEvent.objects.filter(job=job, kind="policy.drifted").exists()
    # Heal: the cluster is configured to auto-heal; the next reconcile re-pushes.
    job.cluster.auto_heal = True
    job.cluster.save()
    reconcile_all()
    wait_state(sync, {"applied"})
    live, _ = read_live(kube, job)
    assert live["metadata"]["annotations"][c.ANNOTATION_RECOVER_STRATEGY] == "retry,recover,dump"


def test_operator_recreating_the_podgroup_is_drift(job: TrainingJob, kube: k8s.ApiClient) -> None:
    sync, pg = applied_in_platform_mode(job, kube)
    custom = k8s.CustomObjectsApi(kube)
    name = pg["metadata"]["name"]
    custom.delete_namespaced_custom_object(
        c.PODGROUP_GROUP, c.PODGROUP_VERSION, job.namespace, c.PODGROUP_PLURAL, name
    )
    stale = {k: v for k, v in pg["metadata"]["annotations"].items() if k != c.ANNOTATION_PLATFORM_STRATEGY}
    custom.create_namespaced_custom_object(
        c.PODGROUP_GROUP,
        c.PODGROUP_VERSION,
        job.namespace,
        c.PODGROUP_PLURAL,
        {
            "apiVersion": c.PODGROUP_API_VERSION,
            "kind": c.PODGROUP_KIND,
            "metadata": {"name": name, "namespace": job.namespace, "annotations": stale},
            "spec": {"minMember": 2},
        },
    )
    reconcile_all()
    sync.refresh_from_db()
    assert sync.state == "drifted"
    assert ("PodGroup", f"metadata.annotations.{c.ANNOTATION_PLATFORM_STRATEGY}") in {
        (d["object"], d["key"]) for d in sync.drift
    }


def test_unreachable_cluster_fails_with_why_and_recovers_by_itself(
    live_job: Callable[..., TrainingJob],
    worker_factory: Callable[..., Worker],
    tmp_path,
) -> None:
    from tests.support import free_port
    from tests.support.cluster import create_live_job

    port = free_port()
    offline = KubeApiEmulator(host="127.0.0.1", port=port)
    kubeconfig = offline.write_kubeconfig(tmp_path / "offline.kubeconfig")
    worker_factory(PUSH_RETRY_BUDGET_SECONDS="2")
    job = live_job(kubeconfig=str(kubeconfig))
    sync = wait_state(save(job), {"failed"}, timeout=30)
    assert "unreachable" in sync.last_error and sync.retryable
    offline.start()
    try:
        from kubernetes import config as k8s_config

        api = k8s_config.new_client_from_config(config_file=str(kubeconfig))
        create_live_job(api, job.namespace, job.name)
        with override_settings(PUSH_FAILED_RETRY_SECONDS=0):
            assert sync.pk in sweep_stuck_syncs()
        wait_state(sync, {"applied"})
    finally:
        offline.stop()


def test_newer_revision_supersedes_one_in_flight(
    live_job: Callable[..., TrainingJob],
    worker_factory: Callable[..., Worker],
    kube: k8s.ApiClient,
) -> None:
    job = live_job()
    first = save(job, {"strategies": ["dump"]})
    second = save(job, {"strategies": ["retry"]})
    worker_factory()
    wait_state(second, {"applied"})
    wait_state(first, {"superseded"})
    live, _ = read_live(kube, job)
    assert live["metadata"]["annotations"][c.ANNOTATION_RECOVER_STRATEGY] == "retry"
    assert live["metadata"]["annotations"][c.ANNOTATION_POLICY_REVISION] == "2"


def test_permanent_error_fails_at_once_with_a_clear_reason(
    job: TrainingJob,
    emulator: KubeApiEmulator,
) -> None:
    emulator.faults.fail_next(1, status=403)
    sync = wait_state(save(job), {"failed"})
    assert "not allowed" in sync.last_error and not sync.retryable
    assert JobEvent.objects.filter(job=job, kind="policy.failed").exists()


def test_a_push_during_a_fault_never_resets_the_platform_answer(
    job: TrainingJob,
    kube: k8s.ApiClient,
) -> None:
    from apps.policies.syncs import sync_request_apply

    sync, pg = applied_in_platform_mode(job, kube)
    custom = k8s.CustomObjectsApi(kube)
    custom.patch_namespaced_custom_object(  # the decision service answered ClusterD
        c.PODGROUP_GROUP,
        c.PODGROUP_VERSION,
        job.namespace,
        c.PODGROUP_PLURAL,
        pg["metadata"]["name"],
        {"metadata": {"annotations": {c.ANNOTATION_PLATFORM_STRATEGY: "retry"}}},
        _content_type="application/merge-patch+json",
    )
    wait_state(sync_request_apply(job=job), {"applied"})
    _, pg = read_live(kube, job)
    assert pg["metadata"]["annotations"][c.ANNOTATION_PLATFORM_STRATEGY] == "retry"
    reconcile_all()
    sync.refresh_from_db()
    assert sync.state == "applied", sync.drift

"""Fixtures for the write path: an emulated cluster over HTTP, a private Redis, a real Celery worker.

Nothing here is mocked: the official ``kubernetes`` client talks to the API emulator, the broker
is a real redis-server of our own (so a test can restart it), and pushes run in a real
``celery worker`` process that reads the test database.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from apps.jobs.models import Cluster, TrainingJob
from controlplane.celery import app as celery_app
from mindcluster import keys as c
from simcluster.kubeapi import KubeApiEmulator
from tests.support import RedisServer, wait_for

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def broker() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    old = celery_app.conf.broker_url
    _use_broker(server.url)
    yield server
    _use_broker(old)
    server.stop()


def _use_broker(url: str) -> None:
    """Point this process's Celery app at another broker (what a fork does: drop cached pools)."""
    celery_app.conf.broker_url = url
    celery_app._after_fork()


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeApiEmulator]:
    emu = KubeApiEmulator(host="127.0.0.1", port=0)
    emu.start()
    emu.kubeconfig = emu.write_kubeconfig(tmp_path_factory.mktemp("kube") / "kubeconfig")  # type: ignore[attr-defined]
    yield emu
    emu.stop()


@pytest.fixture
def kube(emulator: KubeApiEmulator) -> Iterator[k8s.ApiClient]:
    api = k8s_config.new_client_from_config(config_file=str(emulator.kubeconfig))  # type: ignore[attr-defined]
    emulator.faults.clear()
    yield api
    emulator.faults.clear()
    api.close()


def worker_env(broker_url: str, **overrides: str) -> dict[str, str]:
    db = connection.settings_dict
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "controlplane.settings.test",
            "DATABASE_URL": (
                f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
            ),
            "TEST_REDIS_URL": broker_url,
            "REDIS_URL": broker_url,
            "PUSH_BACKOFF_BASE_SECONDS": "0.05",
            "PUSH_BACKOFF_MAX_SECONDS": "1.0",
            "PUSH_RETRY_BUDGET_SECONDS": "60",
            "PUSH_LEASE_SECONDS": "20",
        }
    )
    env.update(overrides)
    return env


class Worker:
    """A real ``celery worker`` process (prefork, one child) consuming the push and slow queues."""

    def __init__(self, broker_url: str, **env: str) -> None:
        self.env = worker_env(broker_url, **env)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(f"/tmp/celery-worker-{uuid.uuid4().hex[:8]}.log")

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "controlplane",
                "worker",
                "-Q",
                "push,slow,default",
                "-c",
                "1",
                "--pool",
                "prefork",
                "-l",
                "info",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-n",
                f"test-{uuid.uuid4().hex[:6]}@%h",
            ],
            cwd=REPO,
            env=self.env,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(lambda: "ready" in self.log.read_text(errors="replace"), 60, "celery worker ready")

    def child_pids(self) -> list[int]:
        assert self.proc is not None
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout
        return [int(pid) for pid in out.split()]

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def worker_factory(broker: RedisServer) -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def make(start: bool = True, **env: str) -> Worker:
        worker = Worker(broker.url, **env)
        if start:
            worker.start()
        started.append(worker)
        return worker

    yield make
    for worker in started:
        worker.stop()


def purge_queues() -> None:
    with celery_app.connection_for_write() as conn:
        for queue in ("push", "slow", "default"):
            conn.default_channel.queue_purge(queue)


BASE_JOB: dict[str, Any] = {
    "apiVersion": c.ASCENDJOB_API_VERSION,
    "kind": c.ASCENDJOB_KIND,
    "metadata": {
        "labels": {"framework": "pytorch", "ring-controller.atlas": "ascend-910b", "team": "llm"},
        "annotations": {"owner.example.com/contact": "ml-team"},
    },
    "spec": {
        "schedulerName": "volcano",
        "runPolicy": {"schedulingPolicy": {"minAvailable": 2, "queue": "default"}},
        "successPolicy": "AllWorkers",
        "replicaSpecs": {
            role: {
                "replicas": 1,
                "restartPolicy": "Never",
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "ascend",
                                "image": "mindspeed-llm:2.3.0",
                                "env": [{"name": "USER_SETTING", "value": "keep-me"}],
                                "ports": [{"containerPort": 2222, "name": "ascendjob-port"}],
                                "resources": {
                                    "requests": {"huawei.com/Ascend910": 8},
                                    "limits": {"huawei.com/Ascend910": 8},
                                },
                            }
                        ]
                    }
                },
            }
            for role in ("Master", "Worker")
        },
    },
}


def create_live_job(api: k8s.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    """An AscendJob plus the PodGroup the operator would create for it (labels/annotations copied)."""
    core = k8s.CoreV1Api(api)
    try:
        core.create_namespace({"metadata": {"name": namespace}})
    except k8s.ApiException as exc:
        if exc.status != 409:
            raise
    custom = k8s.CustomObjectsApi(api)
    body = {**BASE_JOB, "metadata": {**BASE_JOB["metadata"], "name": name, "namespace": namespace}}
    job = custom.create_namespaced_custom_object(
        c.ASCENDJOB_GROUP, c.ASCENDJOB_VERSION, namespace, c.ASCENDJOB_PLURAL, body
    )
    meta = job["metadata"]
    custom.create_namespaced_custom_object(
        c.PODGROUP_GROUP,
        c.PODGROUP_VERSION,
        namespace,
        c.PODGROUP_PLURAL,
        {
            "apiVersion": c.PODGROUP_API_VERSION,
            "kind": c.PODGROUP_KIND,
            "metadata": {
                "name": f"{name}-{meta['uid']}",
                "namespace": namespace,
                "labels": dict(meta.get("labels") or {}),
                "annotations": dict(meta.get("annotations") or {}),
            },
            "spec": {"minMember": 2, "queue": "default"},
        },
    )
    return job


@pytest.fixture
def live_job(kube: k8s.ApiClient, emulator: KubeApiEmulator) -> Callable[..., TrainingJob]:
    def make(*, auto_heal: bool = False, kubeconfig: str | None = None) -> TrainingJob:
        namespace = f"ns-{uuid.uuid4().hex[:8]}"
        name = f"llama-{uuid.uuid4().hex[:6]}"
        manifest = create_live_job(kube, namespace, name)
        cluster, _ = Cluster.objects.get_or_create(
            name=f"sim-{uuid.uuid4().hex[:6]}",
            defaults={"kubeconfig_path": kubeconfig or str(emulator.kubeconfig), "auto_heal": auto_heal},  # type: ignore[attr-defined]
        )
        return TrainingJob.objects.create(
            cluster=cluster,
            namespace=namespace,
            name=name,
            uid=manifest["metadata"]["uid"],
            framework="pytorch",
            replicas={"Master": 1, "Worker": 1},
            npus_per_pod=8,
            mindcluster_version="26.1",
        )

    return make


def read_live(api: k8s.ApiClient, job: TrainingJob) -> tuple[dict[str, Any], dict[str, Any]]:
    custom = k8s.CustomObjectsApi(api)
    live = custom.get_namespaced_custom_object(
        c.ASCENDJOB_GROUP, c.ASCENDJOB_VERSION, job.namespace, c.ASCENDJOB_PLURAL, job.name
    )
    pg = custom.get_namespaced_custom_object(
        c.PODGROUP_GROUP,
        c.PODGROUP_VERSION,
        job.namespace,
        c.PODGROUP_PLURAL,
        f"{job.name}-{live['metadata']['uid']}",
    )
    return live, pg


__all__ = ["settings"]

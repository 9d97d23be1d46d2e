"""The write path's live parts: AscendJobs (with the PodGroup the operator would make) in the
Kubernetes API emulator, and a real ``celery worker`` process reading the test database.

The ``broker`` and ``worker_factory`` fixtures (root ``tests/conftest.py``) start them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from apps.jobs.models import TrainingJob
from controlplane.celery import app as celery_app
from mindcluster import keys as c
from simcluster.kubeapi import KubeApiEmulator
from tests.support.processes import child_env, start_python_module, wait_for


@contextmanager
def emulator_with_kubeconfig(directory: Path) -> Iterator[KubeApiEmulator]:
    """A running API emulator, its admin kubeconfig written in ``directory`` (``emu.kubeconfig``)."""
    with KubeApiEmulator(host="127.0.0.1", port=0) as emu:
        emu.kubeconfig = emu.write_kubeconfig(directory / "kubeconfig")  # type: ignore[attr-defined]
        yield emu


def use_broker(url: str) -> None:
    """Point this process's Celery app at another broker (what a fork does: drop cached pools)."""
    celery_app.conf.broker_url = url
    celery_app._after_fork()


def worker_env(broker_url: str, **overrides: str) -> dict[str, str]:
    """Environment of a Celery worker on the test database and ``broker_url``, with short push timings."""
    short_push = {
        "PUSH_BACKOFF_BASE_SECONDS": "0.05",
        "PUSH_BACKOFF_MAX_SECONDS": "1.0",
        "PUSH_RETRY_BUDGET_SECONDS": "60",
        "PUSH_LEASE_SECONDS": "20",
    }
    return child_env(broker_url, **{**short_push, **overrides})


QUEUES = ("push", "slow", "default")


class Worker:
    """A real ``celery worker`` process (prefork, one child) consuming the push and slow queues."""

    def __init__(self, broker_url: str, **env: str) -> None:
        self.broker_url = broker_url
        self.env = worker_env(broker_url, **env)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(f"/tmp/celery-worker-{os.getpid()}-{uuid.uuid4().hex[:8]}.log")
        # Celery expands %h to the host name; remote control addresses the worker by the full name.
        self.name = f"test-{uuid.uuid4().hex[:6]}@{socket.gethostname()}"

    def start(self) -> None:
        one_child = ["-c", "1", "--pool", "prefork"]
        quiet = ["--without-gossip", "--without-mingle", "--without-heartbeat"]
        args = ["-A", "controlplane", "worker", "-Q", ",".join(QUEUES), *one_child, "-l", "info", *quiet]
        self.proc = start_python_module(
            "celery", [*args, "-n", self.name], env=self.env, log=self.log, new_session=True
        )
        wait_for(lambda: "ready" in self.log.read_text(errors="replace"), 60, "celery worker ready")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def consume(self, on: bool) -> None:
        """Start (``on``) or stop taking messages from the queues while the process stays up.

        Celery's remote control, answered by the worker itself: when this returns, the worker has
        added or cancelled its consumers. Tasks it already holds (a retry's countdown) still run.
        """
        with celery_app.connection_for_write(self.broker_url) as conn:
            for queue in QUEUES:
                kwargs: dict[str, Any] = {
                    "destination": [self.name],
                    "reply": True,
                    "timeout": 15,
                    "limit": 1,
                    "connection": conn,
                }
                if on:
                    replies = celery_app.control.add_consumer(queue, **kwargs)
                else:
                    replies = celery_app.control.cancel_consumer(queue, **kwargs)
                if not replies:
                    raise AssertionError(f"worker {self.name} did not answer ({queue}, on={on})")

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

    def kill(self) -> None:
        """SIGKILL the worker and its children at once (a node lost, an OOM kill): nothing runs after."""
        if self.proc is None:
            return
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self.proc = None

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def purge_queues() -> None:
    with celery_app.connection_for_write() as conn:
        for queue in QUEUES:
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
    create_operator_podgroup(custom, job)
    return job


def create_operator_podgroup(custom: k8s.CustomObjectsApi, job: dict[str, Any]) -> None:
    """The PodGroup the operator creates for the 2-pod AscendJob ``job`` (labels, annotations copied)."""
    meta = job["metadata"]
    custom.create_namespaced_custom_object(
        c.PODGROUP_GROUP,
        c.PODGROUP_VERSION,
        meta["namespace"],
        c.PODGROUP_PLURAL,
        {
            "apiVersion": c.PODGROUP_API_VERSION,
            "kind": c.PODGROUP_KIND,
            "metadata": {
                "name": f"{meta['name']}-{meta['uid']}",
                "namespace": meta["namespace"],
                "labels": dict(meta.get("labels") or {}),
                "annotations": dict(meta.get("annotations") or {}),
            },
            "spec": {"minMember": 2, "queue": "default"},
        },
    )


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

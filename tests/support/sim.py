"""AscendJob manifests and small readers for the simulated MindCluster (``simcluster.runtime.SimCluster``).

The ``sim``/``kube`` fixtures are in ``tests/conftest.py``: one SimCluster per test process, which a
module runs at its own ``sim_clock_speed``.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import pytest

from mindcluster import keys as k
from simcluster.kube import Kube
from simcluster.management.commands.sim_fault import Command as SimFault
from simcluster.runtime import SimCluster
from tests.support.processes import wait_for


def pod_template(
    npus: int = 8,
    *,
    env: list[dict[str, Any]] | None = None,
    ttp: bool = True,
    taskd: bool = True,
    pod_ip: bool = True,
) -> dict[str, Any]:
    """A pod template shaped like the MindCluster samples (container ``ascend``)."""
    env = list(env or [])
    if pod_ip:
        env.append({"name": k.ENV_POD_IP, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    if ttp:
        env.append({"name": k.ENV_TTP_PORT, "value": "8000"})
    ports = [{"name": k.PORT_ASCENDJOB[0], "containerPort": k.PORT_ASCENDJOB[1]}]
    if taskd:
        ports.append({"name": k.PORT_TASKD[0], "containerPort": k.PORT_TASKD[1]})
    if ttp:
        ports.append({"name": k.PORT_TTP_NAME, "containerPort": 8000})
    return {
        "metadata": {"labels": {"ring-controller.atlas": "ascend-910b"}},
        "spec": {
            "containers": [
                {
                    "name": k.CONTAINER_NAME,
                    "image": "mindspeed-dl:v1",
                    "env": env,
                    "ports": ports,
                    "resources": {
                        "limits": {"huawei.com/Ascend910": npus},
                        "requests": {"huawei.com/Ascend910": npus},
                    },
                }
            ]
        },
    }


def make_job(
    name: str,
    *,
    framework: str = "pytorch",
    release: str = "26.1",
    strategies: str | None = "retry,recover,dump",
    workers: int = 1,
    npus: int = 8,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    namespace: str = "default",
    backoff_limit: int | None = None,
    **template_kw: Any,
) -> dict[str, Any]:
    """An AscendJob manifest with a leader and ``workers`` workers."""
    leader = k.LEADER_ROLE[framework]
    meta_labels = {
        "framework": framework,
        "ring-controller.atlas": "ascend-910b",
        "fault-scheduling": "grace",
        "mindcluster.io/release": release,
        **(labels or {}),
    }
    meta_annotations = dict(annotations or {})
    if strategies is not None:
        meta_annotations[k.ANNOTATION_RECOVER_STRATEGY] = strategies
    template = pod_template(npus, **template_kw)
    run_policy: dict[str, Any] = {"schedulingPolicy": {"minAvailable": workers + 1, "queue": "default"}}
    if backoff_limit is not None:
        run_policy["backoffLimit"] = backoff_limit
    return {
        "apiVersion": k.ASCENDJOB_API_VERSION,
        "kind": k.ASCENDJOB_KIND,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": meta_labels,
            "annotations": meta_annotations,
        },
        "spec": {
            "schedulerName": "volcano",
            "runPolicy": run_policy,
            "successPolicy": "AllWorkers",
            "replicaSpecs": {
                leader: {"replicas": 1, "restartPolicy": "Never", "template": copy.deepcopy(template)},
                k.WORKER_ROLE: {
                    "replicas": workers,
                    "restartPolicy": "Never",
                    "template": copy.deepcopy(template),
                },
            },
        },
    }


def conditions(job: dict[str, Any] | None) -> list[str]:
    return [c["type"] for c in ((job or {}).get("status") or {}).get("conditions") or []]


def create_job(kube: Kube, manifest: dict[str, Any], *, running: bool = True) -> dict[str, Any]:
    """Create the AscendJob and (by default) wait until the operator reports it Running."""
    namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    kube.custom.create_namespaced_custom_object(
        k.ASCENDJOB_GROUP, k.ASCENDJOB_VERSION, namespace, k.ASCENDJOB_PLURAL, manifest
    )
    if not running:
        return kube.get_job(namespace, name) or {}
    return wait_for(
        lambda: (lambda j: j if "Running" in conditions(j) else None)(kube.get_job(namespace, name)),
        what=f"job {name} Running",
    )


def podgroup_of(kube: Kube, job: dict[str, Any]) -> dict[str, Any] | None:
    meta = job["metadata"]
    return kube.get_podgroup(meta["namespace"], f"{meta['name']}-{meta['uid']}")


def event_reasons(kube: Kube, job: dict[str, Any]) -> list[str]:
    return [e["reason"] for e in kube.list_events(job["metadata"]["namespace"], job["metadata"]["name"])]


def events_text(kube: Kube, job: dict[str, Any]) -> str:
    return "\n".join(
        f"{e['reason']}: {e['message']}"
        for e in kube.list_events(job["metadata"]["namespace"], job["metadata"]["name"])
    )


def run_sim_fault(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``manage.py sim_fault`` in-process; returns (exit code, stdout, stderr)."""
    code = 0
    try:
        SimFault().run_from_argv(["manage.py", "sim_fault", *argv])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@contextlib.contextmanager
def clock_speed(sim: SimCluster, speed: float) -> Iterator[None]:
    """Run the shared simulated cluster at ``speed`` for a block, then at its own speed again.

    For a test whose real-time steps (a patch the test writes while ClusterD waits) must fit inside a
    simulated timeout even on a loaded machine.
    """
    before = sim.clock.speed
    sim.clock.set_speed(speed)
    try:
        yield
    finally:
        sim.clock.set_speed(before)

"""AscendJob manifests and small readers for the simulated MindCluster (``simcluster.runtime.SimCluster``).

The ``sim``/``kube`` fixtures are in ``tests/conftest.py``: one SimCluster per test process, which a
module runs at its own ``sim_clock_speed``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from mindcluster import keys as k
from mindcluster import reset_json as rj
from simcluster.fleet import ascend_job
from simcluster.kube import Kube
from simcluster.management.commands.sim_fault import Command as SimFault
from simcluster.runtime import SimCluster
from tests.support.processes import wait_for

# The tests' name for simcluster's AscendJob builder: the fleet and the tests share one manifest shape.
make_job = ascend_job


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


def reset_json_writes(sim: SimCluster, monkeypatch: pytest.MonkeyPatch, name: str) -> list[dict]:
    """Every reset.json document the simulated ClusterD writes for job ``name`` from now on, in order
    (the list fills as the test runs)."""
    assert sim.clusterd is not None
    kube = sim.clusterd.kube
    docs: list[dict] = []
    upsert = kube.upsert_configmap

    def recording(namespace: str, cm_name: str, data: dict[str, str]) -> None:
        if cm_name == rj.configmap_name(name):
            docs.append(json.loads(data[rj.DATA_KEY]))
        upsert(namespace, cm_name, data)

    monkeypatch.setattr(kube, "upsert_configmap", recording)
    return docs

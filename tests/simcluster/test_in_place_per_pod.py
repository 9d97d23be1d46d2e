"""v26 recover-in-place per pod: with one fault pod restartable in place and another not, ClusterD
restarts the first in place and the second as a pod (Ascend/mind-cluster at 22bb3d98,
component/clusterd/pkg/application/recover/controller.go:1023-1030, 2124-2163); before v26.0.0 it was
all or nothing, so the job gets recover instead (v7.3.0 component/clusterd/pkg/domain/common/
utils.go:458-468)."""

from __future__ import annotations

from typing import Any

from simcluster.injector import FaultSpec
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.sim import create_job, event_reasons, events_text, make_job


def _uids(kube: Kube, name: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.list_job_pods("default", name)}


def _mixed_fault(sim: SimCluster, kube: Kube, name: str, release: str) -> tuple[dict[str, Any], set[str]]:
    job = create_job(kube, make_job(name, strategies="recover-in-place,recover", release=release))
    uid = job["metadata"]["uid"]
    wait_for(lambda: sim.clusterd.init_snapshot(uid), what=f"{name}: Init")
    before = _uids(kube, name)
    sim.clusterd.inject(
        # pod 1: a business-process fault (restartable in place); pod 0: SeparateNPU (not).
        FaultSpec(namespace="default", job=name, rank=1, kind="normal", level="", recovers=True),
        FaultSpec(namespace="default", job=name, rank=0, kind="normal", level="SeparateNPU", recovers=True),
    )
    assert sim.wait_idle(30)
    after = _uids(kube, name)
    return job, {pod for pod, pod_uid in before.items() if after.get(pod) != pod_uid}


def test_v26_restarts_the_unrestartable_pod_as_a_pod_and_the_other_in_place(
    sim: SimCluster, kube: Kube
) -> None:
    job, changed = _mixed_fault(sim, kube, "ipp-v26", "26.1")
    text = events_text(kube, job)
    assert "StrategyChosen: recover-in-place" in text
    assert "PodsRestarted: pods [0]" in text
    assert len(changed) == 1  # only the rank-0 pod was recreated


def test_v7_3_is_all_or_nothing(sim: SimCluster, kube: Kube) -> None:
    job, _ = _mixed_fault(sim, kube, "ipp-v73", "7.3")
    text = events_text(kube, job)
    assert "StrategyChosen: recover-in-place" not in text
    assert "StrategyChosen: recover:" in text
    assert "PodsRestarted" not in event_reasons(kube, job)

"""Demo content: seeded jobs of both frameworks and several releases, one deliberately misconfigured.

The product seeds them (``apps.web.demo_jobs``, ``demo_setup --seed-jobs``); the simulator runs them.
"""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from apps.cluster.client import ClusterRef
from apps.web.demo_jobs import DEMO_JOBS, build_demo_manifests, seed_demo_jobs
from mindcluster import keys as k
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.sim import conditions, events_text


@pytest.fixture(scope="module")
def demo_sim() -> Iterator[SimCluster]:
    # No random faults here: the test injects its own, so outcomes are deterministic.
    cluster = SimCluster(clock_speed=500, seed=5)
    cluster.start()
    seed_demo_jobs(ClusterRef(name="demo", kubeconfig_path=cluster.kubeconfig_path))
    try:
        yield cluster
    finally:
        cluster.stop()


def test_demo_manifests_cover_both_frameworks_and_several_releases() -> None:
    manifests = [m for m, _ in build_demo_manifests()]
    assert len(manifests) == len(DEMO_JOBS) >= 6
    frameworks = {m["metadata"]["labels"][k.LABEL_FRAMEWORK] for m in manifests}
    releases = {m["metadata"]["labels"][k.LABEL_RELEASE] for m in manifests}
    assert frameworks == {"pytorch", "mindspore"}
    assert len(releases) >= 3
    rendered = [m for m, cm in build_demo_manifests() if cm is not None]
    unrendered = [
        m for m in manifests if k.ANNOTATION_RECOVER_STRATEGY not in m["metadata"].get("annotations", {})
    ]
    assert rendered and unrendered


def test_demo_jobs_run_and_the_misconfigured_one_falls_back(demo_sim: SimCluster) -> None:
    kube = Kube(demo_sim.kubeconfig_path)
    try:
        for demo in DEMO_JOBS:
            wait_for(
                lambda name=demo.name: "Running" in conditions(kube.get_job("default", name)),
                what=f"demo job {demo.name} Running",
            )
        broken = kube.get_job("default", "broken-dump")
        assert demo_sim.taskd.supported_strategies(broken)[0] == {"exit"}
        demo_sim.inject_fault("default", "broken-dump", rank=1, fault_type="normal", recovers=True)
        healthy = kube.get_job("default", "llama-pretrain")
        demo_sim.inject_fault("default", "llama-pretrain", rank=1, fault_type="uce", recovers=True)
        assert demo_sim.wait_idle(20)
        # A software fault makes the job UnHealthy (fault_recover_service.go:788-791), so dump-first
        # goes DumpForFault: saveAndExit without asking TaskD (controller.go:676-681), which cannot
        # save without its TTP port: dump-failed, then rescheduling (controller.go:1451-1457).
        text = events_text(kube, broken)
        assert "StrategyChosen: dump" in text and "dump-failed" in text
        assert "StrategyChosen: retry" in events_text(kube, healthy)
    finally:
        kube.close()


@pytest.mark.django_db
def test_demo_setup_seeds_the_jobs_into_the_default_cluster_once(demo_sim: SimCluster, settings: Any) -> None:
    settings.KUBECONFIG = demo_sim.kubeconfig_path
    kube = Kube(demo_sim.kubeconfig_path)
    try:
        kube.custom.delete_namespaced_custom_object(
            k.ASCENDJOB_GROUP, k.ASCENDJOB_VERSION, "default", k.ASCENDJOB_PLURAL, "plain-resnet"
        )
        wait_for(lambda: not _job_exists(kube, "plain-resnet"), what="plain-resnet deleted")
        out = StringIO()
        call_command("demo_setup", "--username", "seeder", "--seed-jobs", stdout=out)
        assert "demo jobs created: plain-resnet" in out.getvalue()  # the others already exist
        assert _job_exists(kube, "plain-resnet")
        again = StringIO()
        call_command("demo_setup", "--username", "seeder", stdout=again)
        assert "demo jobs" not in again.getvalue()  # seeding is asked for, never implied
    finally:
        kube.close()


def _job_exists(kube: Kube, name: str) -> bool:
    return kube.get_job("default", name) is not None

"""The conformance table (``scenarios.yaml``) against (a) the what-if simulator and (b) the built-in
cluster driven for real: job created through the Kubernetes API emulator with the official client,
PodGroup and pods from the operator, Init from the agent, live keys patched, faults injected, and
only what ClusterD wrote is read back."""

from __future__ import annotations

import uuid

import pytest

from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.conformance.runners import run_builtin, run_whatif
from tests.conformance.scenarios import SCENARIOS, Scenario, sources

IDS = [s.id for s in SCENARIOS]


@pytest.fixture(scope="module")
def sim_clock_speed() -> float:
    # 3000x on the shared SimCluster: a 300 s platform wait takes 0.1 s, a Job-level rescheduling 50 ms.
    return 3000


@pytest.fixture(scope="module")
def namespace(kube: Kube) -> str:
    name = f"conformance-{uuid.uuid4().hex[:6]}"
    kube.ensure_namespace(name)
    return name


def test_the_table_is_big_enough_and_cites_the_source() -> None:
    # Issue #25: at least 120 scenarios over at least 70 distinct source ranges.
    assert len(SCENARIOS) >= 120
    assert len(sources()) >= 70
    assert len({s.id for s in SCENARIOS}) == len(SCENARIOS)
    assert all(s.src and all(":" in src and src.startswith("component/") for src in s.src) for s in SCENARIOS)
    print(f"\n{len(SCENARIOS)} scenarios citing {len(sources())} source ranges:")
    for src in sources():
        print(f"  {src}")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_whatif_simulator(scenario: Scenario) -> None:
    assert run_whatif(scenario) == scenario.expected, scenario.src


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_builtin_clusterd(sim: SimCluster, kube: Kube, namespace: str, scenario: Scenario) -> None:
    assert run_builtin(sim, kube, scenario, namespace) == scenario.expected, scenario.src

"""The what-if simulator and the simulated ClusterD agree, fault scenario by fault scenario.

The what-if answer is computed without a cluster; the simulated ClusterD runs the real flow against
the API emulator (operator-made PodGroup, TaskD-reported strategies from the pods' env and ports) and
is observed only through what it writes: its ``StrategyChosen`` Events, in resourceVersion order.

Not evidence on its own (issue 13): both sides call the same ``engine.plan``, so this property only
shows that the controller executes the engine faithfully and that the what-if feeds it the same
inputs (snapshot, agent words, faults). Whether ``engine.plan`` itself matches MindCluster is shown by
``tests/conformance/``, whose expected outcomes are written by hand from the Go source, line by line.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from apps.decisions.whatif import parse_scenario, simulate
from apps.policies.rendering import render
from apps.policies.validation import validate_policy
from mindcluster import keys as c
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.cluster import BASE_JOB

pytestmark = pytest.mark.slow(seconds=25)
NPUS_PER_POD = 8
PODS = 4  # Master + 3 Workers


@pytest.fixture(scope="module")
def sim_clock_speed() -> float:
    return 400  # the shared SimCluster at 400x while this module runs


@pytest.fixture(scope="module")
def api(sim: SimCluster) -> k8s.ApiClient:
    return k8s_config.new_client_from_config(config_file=sim.kubeconfig_path)


def strategy_sets() -> st.SearchStrategy[list[str]]:
    return st.lists(
        st.sampled_from(["retry", "recover-in-place", "recover", "dump", "elastic-training"]),
        unique=True,
        max_size=4,
    )


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    policy = {
        "mindcluster_version": "26.1",
        "strategies": draw(strategy_sets()),
        "fault_scheduling": draw(st.sampled_from(["grace", "off"])),
        "pod_rescheduling": draw(st.booleans()),
    }
    fault = {
        "type": draw(st.sampled_from(["uce", "hccl", "normal", "node"])),
        "pod": draw(st.integers(min_value=0, max_value=PODS - 1)),
        "attempts": draw(st.lists(st.booleans(), min_size=1, max_size=4)),
    }
    return policy, fault


def run_in_simulator(
    sim: SimCluster, api: k8s.ApiClient, policy: dict[str, Any], fault: dict[str, Any]
) -> list[str]:
    spec = validate_policy(policy).spec
    assert spec is not None, policy
    name = f"wi-{uuid.uuid4().hex[:8]}"
    manifest = copy.deepcopy(BASE_JOB)
    manifest["metadata"].update({"name": name, "namespace": "default"})
    manifest["spec"]["replicaSpecs"]["Worker"]["replicas"] = PODS - 1
    rendered = render(manifest, spec)
    custom = k8s.CustomObjectsApi(api)
    core = k8s.CoreV1Api(api)
    custom.create_namespaced_custom_object(
        c.ASCENDJOB_GROUP, c.ASCENDJOB_VERSION, "default", c.ASCENDJOB_PLURAL, rendered.manifest
    )
    if rendered.configmap:
        core.create_namespaced_config_map("default", rendered.configmap)
    wait_for(lambda: _pods_running(core, name), 20, f"{name} pods")
    sim.inject_fault("default", name, rank=fault["pod"], fault_type=fault["type"], recovers=fault["attempts"])
    assert sim.wait_idle(30)
    events = core.list_namespaced_event("default", field_selector=f"involvedObject.name={name}").items
    events.sort(key=lambda e: int(e.metadata.resource_version))
    chosen = [e.message.split(":", 1)[0] for e in events if e.reason == "StrategyChosen"]
    custom.delete_namespaced_custom_object(
        c.ASCENDJOB_GROUP, c.ASCENDJOB_VERSION, "default", c.ASCENDJOB_PLURAL, name
    )
    return chosen


def _pods_running(core: k8s.CoreV1Api, name: str) -> bool:
    pods = core.list_namespaced_pod("default", label_selector=f"job-name={name}").items
    return len(pods) == PODS and all(p.status and p.status.phase == "Running" for p in pods)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=scenarios())
def test_whatif_and_simulated_clusterd_choose_the_same_sequence(
    sim: SimCluster, api: k8s.ApiClient, case: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    policy, fault = case
    spec = validate_policy(policy).spec
    assert spec is not None
    rehearsal = simulate(
        spec,
        parse_scenario(
            {
                "pods": PODS,
                "npus_per_pod": NPUS_PER_POD,
                "faults": [
                    {
                        "type": fault["type"],
                        "ranks": [fault["pod"] * NPUS_PER_POD],
                        "attempts": fault["attempts"],
                    }
                ],
            }
        ),
    )
    expected = rehearsal["faults"][0]["strategies"]
    actual = run_in_simulator(sim, api, policy, fault)
    assert actual == expected, {"policy": policy, "fault": fault, "steps": rehearsal["faults"][0]["steps"]}

"""Simulated TaskD: supported strategies follow the pods' env, ports and flags.

Rules from mindcluster.md §3.3, §5 and §10.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mindcluster import keys as k
from simcluster.operator import PodSlot, build_pod, pod_slots
from simcluster.taskd import evaluate_support, parse_manager_config
from tests.support import wait_for
from tests.support.sim import create_job, events_text, make_job

EVERYTHING = {"retry", "recover", "recover-in-place", "elastic-training", "dump", "exit"}


def pods_for(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    manifest = copy.deepcopy(manifest)
    manifest["metadata"]["uid"] = "uid-1"
    return [
        build_pod(manifest, slot, node="node-1", version=0, clusterd_ip="127.0.0.1")
        for slot in pod_slots(manifest)
    ]


def support(manifest: dict[str, Any], manager_py: str | None = None) -> tuple[set[str], list[str]]:
    report = evaluate_support(manifest, pods_for(manifest), manager_py)
    return report.supported, report.reasons


def test_fully_configured_job_supports_everything() -> None:
    supported, reasons = support(make_job("full"))
    assert supported == EVERYTHING and reasons == []


def test_no_ttp_port_in_taskd_era_leaves_only_exit() -> None:
    supported, reasons = support(make_job("nottp", release="7.3", ttp=False))
    assert supported == {"exit"}
    assert "controller.py" in reasons[0]


def test_no_ttp_port_before_73_only_drops_dump() -> None:
    supported, _ = support(make_job("nottp72", release="7.2", ttp=False))
    assert supported == EVERYTHING - {"dump"}


def test_no_pod_ip_leaves_only_exit() -> None:
    supported, reasons = support(make_job("noip", pod_ip=False))
    assert supported == {"exit"}
    assert "POD_IP" in reasons[0]


def test_no_taskd_port_from_73_means_nothing() -> None:
    supported, reasons = support(make_job("noport", release="7.3", taskd=False))
    assert supported == set()
    assert "unreachable" in reasons[0]


def test_71_needs_process_recover_env_by_hand() -> None:
    assert support(make_job("old", release="7.1"))[0] == set()
    manual = [{"name": k.ENV_PROCESS_RECOVER, "value": "on"}]
    supported, reasons = support(make_job("old2", release="7.1", env=manual))
    assert supported == {"retry", "recover", "dump", "exit"}  # no in-place flag, no elastic in 7.1
    assert any(k.ENV_ENABLE_RESTART_FAULT_PROCESS in r for r in reasons)


def test_mindspore_never_elastic_and_no_npu_memory_caching_disables_retry() -> None:
    assert "elastic-training" not in support(make_job("ms", framework="mindspore"))[0]
    env = [{"name": k.ENV_PYTORCH_NO_NPU_MEMORY_CACHING, "value": "1"}]
    assert "retry" not in support(make_job("cache", env=env))[0]


MANAGER = """
import os
from taskd.api import init_taskd_manager, start_taskd_manager
node_nums = {nodes}
init_taskd_manager({{"job_id": os.getenv("MINDX_TASK_ID"), "node_nums": node_nums, "proc_per_node": {procs}}})
start_taskd_manager()
"""


def test_manager_config_literals_are_resolved() -> None:
    config = parse_manager_config(MANAGER.format(nodes=2, procs=8))
    assert config == {"job_id": "<expr>", "node_nums": 2, "proc_per_node": 8}
    assert parse_manager_config("this is not python(") is None


def test_manager_config_matching_the_job_is_fine() -> None:
    assert support(make_job("mgr-ok"), MANAGER.format(nodes=2, procs=8))[0] == EVERYTHING


def test_manager_config_mismatch_disables_process_recovery() -> None:
    report = evaluate_support(
        make_job("mgr-bad"), pods_for(make_job("mgr-bad")), MANAGER.format(nodes=4, procs=8)
    )
    assert report.supported == {"exit"}
    assert report.problems[0][0] == "TaskDConfigMismatch"
    assert "32" in report.problems[0][1] and "16" in report.problems[0][1]


def test_manager_config_with_string_counts_fails_init() -> None:
    report = evaluate_support(
        make_job("mgr-str"), pods_for(make_job("mgr-str")), MANAGER.format(nodes='"2"', procs=8)
    )
    assert report.supported == {"exit"}
    assert "init_taskd_manager returned False" in report.problems[0][1]


# --- end to end ------------------------------------------------------------------------------------------
def test_dump_without_ttp_port_falls_back_to_exit_and_rescheduling(sim, kube) -> None:
    job = create_job(kube, make_job("td-nottp", release="7.3", strategies="dump", ttp=False))
    # A Healthy job (RestartRequest): with SeparateNPU the job would be UnHealthy and a dump-only
    # config goes straight to dump without asking the agent (controller.go:430-470).
    sim.inject_fault(
        "default", "td-nottp", rank=1, fault_type="normal", level="RestartRequest", recovers=True
    )
    assert sim.wait_idle(20)
    text = events_text(kube, job)
    assert "MindIOControllerNotStarted" in text
    assert "StrategyChosen: exit" in text and "agent reports=[]" in text
    assert "JobRescheduled" in text
    assert sim.taskd.supported_strategies(job)[0] == {"exit"}


def test_manager_mismatch_is_reported_as_warning_event(sim, kube) -> None:
    kube.upsert_configmap(
        "default", "taskd-manager-td-mismatch", {"manager.py": MANAGER.format(nodes=9, procs=8)}
    )
    job = create_job(kube, make_job("td-mismatch"))
    wait_for(lambda: "TaskDConfigMismatch" in events_text(kube, job), what="TaskDConfigMismatch event")
    supported, reasons = sim.taskd.supported_strategies(job)
    assert supported == {"exit"}
    assert any("manager.py" in r for r in reasons)


@pytest.mark.parametrize("slot", [PodSlot("Master", 0, 0)])
def test_build_pod_keeps_template_ports(slot: PodSlot) -> None:
    manifest = make_job("ports")
    manifest["metadata"]["uid"] = "u"
    pod = build_pod(manifest, slot, node="n", version=0, clusterd_ip="127.0.0.1")
    names = {p["name"] for p in pod["spec"]["containers"][0]["ports"]}
    assert {k.PORT_TASKD[0], k.PORT_TTP_NAME} <= names

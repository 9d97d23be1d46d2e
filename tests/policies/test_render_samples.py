"""Every real sample manifest in ``../shared/reference/samples``: rendered with a range of valid policies
into a manifest the real AscendJob CRD schema accepts, or refused with the validator's error.

Expected outcome per file (read from the files themselves):

- ``multi_node_schedule-job_kwok_simulator-8x8.yaml``: reset-config ConfigMap + AscendJob (Master 1,
  Worker 7, no namespace): renders.
- ``multi_pod_schedule-job_llama-2x16.yaml``: ConfigMap + AscendJob whose ascend containers already set
  PROCESS_RECOVER, ELASTIC_PROCESS_RECOVER_ENABLE, TTP_PORT and port ttp-port by hand: renders without
  duplicating any of them (7.2+ warns that the operator injects the first two itself).
- ``training_910b-basic_training_1x8.yaml``: Master 1 (hostNetwork) + Worker 0, with taskd-port already:
  renders; a ``force`` policy is refused (force cannot be combined with hostNetwork).
- ``training_910b-job_llama-1x8.yaml``: Master only (hostNetwork): renders.
- ``training_910b-job_llama-2x8.yaml``: empty ``metadata.name`` and a Master with 2 replicas: refused by
  ``validate_manifest`` (the operator would reject it).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from apps.policies.rendering import render
from apps.policies.spec import (
    PLATFORM_STRATEGIES,
    STRATEGY_SINCE,
    JobContext,
    release_at_least,
    sort_strategies,
)
from apps.policies.validation import validate_manifest, validate_policy
from mindcluster import keys as k
from tests.policies.crd_schema import assert_valid_ascendjob

SHARED_DIR = Path(__file__).resolve().parents[1] / "fixtures"
SAMPLES_DIR = SHARED_DIR / "reference" / "samples"

RENDERS = (
    "multi_node_schedule-job_kwok_simulator-8x8.yaml",
    "multi_pod_schedule-job_llama-2x16.yaml",
    "training_910b-basic_training_1x8.yaml",
    "training_910b-job_llama-1x8.yaml",
)
REFUSED = {"training_910b-job_llama-2x8.yaml": {"manifest_empty_name", "manifest_leader_replicas"}}
HOST_NETWORK = ("training_910b-basic_training_1x8.yaml", "training_910b-job_llama-1x8.yaml")
RELEASES = ("7.0", "7.1", "7.2", "7.3", "26.1")
STRATEGY_SETS = (
    (),
    ("recover",),
    ("recover-in-place", "recover"),
    ("retry", "recover", "dump"),
    ("dump",),
    ("dump", "exit", "retry"),
    ("elastic-training", "recover", "dump"),  # PyTorch only, 7.2+
)


def load(name: str) -> tuple[list[Any], dict[str, Any]]:
    documents = [d for d in yaml.safe_load_all((SAMPLES_DIR / name).read_text(encoding="utf-8")) if d]
    job = next(d for d in documents if d.get("kind") == k.ASCENDJOB_KIND)
    return documents, job


def test_every_sample_has_an_expected_outcome(shared_dir: Path) -> None:
    assert sorted(p.name for p in SAMPLES_DIR.glob("*.yaml")) == sorted([*RENDERS, *REFUSED])


def policies(release: str) -> list[dict[str, Any]]:
    """Valid policies for a release: every strategy set the release has, with and without extras."""
    out: list[dict[str, Any]] = []
    for strategies in STRATEGY_SETS:
        if not all(release_at_least(release, STRATEGY_SINCE[s]) for s in strategies):
            continue
        base = {"mindcluster_version": release, "strategies": list(strategies), "fault_scheduling": "grace"}
        out.append(base)
        out.append({**base, "pod_rescheduling": True, "fault_retry_times": 3, "backoff_limit": 10})
        answerable = [s for s in sort_strategies(strategies) if s in PLATFORM_STRATEGIES and s != "exit"]
        if answerable:
            out.append(
                {
                    **base,
                    "platform_mode": True,
                    "default_strategy": answerable[0],
                    "ttp_port": 8100,
                    "max_restarts": 100,
                    "monitor_interval": 5,
                }
            )
        if "dump" in strategies:
            out.append({**base, "sub_healthy_strategy": "graceExit"})
    return out


def env_names(container: dict[str, Any]) -> list[str]:
    return [e["name"] for e in container.get("env", [])]


def ascend_containers(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        role: next(c for c in rspec["template"]["spec"]["containers"] if c["name"] == "ascend")
        for role, rspec in manifest["spec"]["replicaSpecs"].items()
    }


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("sample", RENDERS)
def test_sample_renders_into_a_valid_ascendjob(shared_dir: Path, sample: str, release: str) -> None:
    _, job = load(sample)
    assert not [i for i in validate_manifest(job) if i.severity == "error"]
    assert_valid_ascendjob(job, shared_dir)  # the sample itself
    context = JobContext.from_manifest(job)
    before = ascend_containers(job)
    for raw in policies(release):
        result = validate_policy(raw, context)
        assert result.ok, (raw, [i.to_dict() for i in result.errors])
        rendered = render(job, result.spec)
        assert_valid_ascendjob(rendered.manifest, shared_dir)
        assert render(rendered.manifest, result.spec).manifest == rendered.manifest, raw
        for role, container in ascend_containers(rendered.manifest).items():
            names = env_names(container)
            assert [n for n, count in Counter(names).items() if count > 1] == [], (role, raw)
            assert set(env_names(before[role])) <= set(names)  # nothing of the user's is dropped
            assert container["args"] == before[role]["args"]
            assert container["command"] == before[role]["command"]
            port_names = {p.get("name") for p in container.get("ports", [])}
            assert {p.get("name") for p in before[role].get("ports", [])} <= port_names
            if raw["strategies"]:
                assert "ttp-port" in port_names
            if rendered.configmap is not None:
                assert "taskd-port" in port_names
        if rendered.configmap is not None:
            assert rendered.configmap["metadata"]["name"] == f"taskd-manager-{job['metadata']['name']}"
            assert rendered.configmap["metadata"].get("namespace") == job["metadata"].get("namespace")
            compile(rendered.configmap["data"]["manager.py"], "manager.py", "exec")
        if release_at_least(release, "7.3") and raw["strategies"]:
            assert rendered.configmap is not None


@pytest.mark.parametrize("sample", sorted(REFUSED))
def test_sample_the_operator_would_reject_is_refused(shared_dir: Path, sample: str) -> None:
    _, job = load(sample)
    errors = {i.code for i in validate_manifest(job) if i.severity == "error"}
    assert errors == REFUSED[sample]


@pytest.mark.parametrize("sample", HOST_NETWORK)
def test_force_with_host_network_is_refused(shared_dir: Path, sample: str) -> None:
    _, job = load(sample)
    result = validate_policy(
        {"mindcluster_version": "7.1", "strategies": ["recover"], "fault_scheduling": "force"},
        JobContext.from_manifest(job),
    )
    assert "force_with_host_network" in {i.code for i in result.errors}


def test_hand_set_recovery_env_is_kept_once_and_warned_about(shared_dir: Path) -> None:
    _, job = load("multi_pod_schedule-job_llama-2x16.yaml")
    result = validate_policy(
        {"mindcluster_version": "7.3", "strategies": ["recover"]}, JobContext.from_manifest(job)
    )
    assert result.ok and "operator_injected_env" in {i.code for i in result.warnings}
    rendered = render(job, result.spec)
    master = ascend_containers(rendered.manifest)["Master"]
    assert env_names(master).count(k.ENV_PROCESS_RECOVER) == 1
    assert [p["name"] for p in master["ports"]] == ["ascendjob-port", "ttp-port", "taskd-port"]
    legacy = render(job, validate_policy({"mindcluster_version": "7.1", "strategies": ["recover"]}).spec)
    master = ascend_containers(legacy.manifest)["Master"]
    assert env_names(master).count(k.ENV_ELASTIC_PROCESS_RECOVER_ENABLE) == 1
    assert legacy.manifest["metadata"]["labels"][k.LABEL_PROCESS_RECOVER_ENABLE] == "on"

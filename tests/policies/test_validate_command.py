"""``manage.py validate_policy``: exit codes, JSON output, manifests, and no database access.

Runs the command as manage.py does, in this process where pytest-django refuses every database
connection (``manage_in_process``), and once in a real subprocess with the base settings whose
DATABASE_URL points at a closed port: any ORM access would fail, so passing tests prove the command
works without a database.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.policies import manage_in_process, manage_without_database

REPO_ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ("reference", "samples")


def run(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return manage_in_process("validate_policy", *args, stdin=stdin)


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def assert_usage_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0]


def test_valid_policy_exits_0_and_prints_the_canonical_spec(tmp_path: Path) -> None:
    policy = write_json(
        tmp_path / "policy.json", {"strategies": "dump,recover", "mindcluster_version": "7.3.0"}
    )
    proc = run(policy)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert set(data) == {"valid", "errors", "warnings", "spec"}
    assert data["valid"] is True and data["errors"] == []
    assert data["spec"]["strategies"] == ["recover", "dump"]
    assert data["spec"]["mindcluster_version"] == "7.3"


def test_the_real_process_with_base_settings_and_no_database(tmp_path: Path) -> None:
    policy = write_json(tmp_path / "policy.json", {"strategies": ["recovery"]})
    proc = manage_without_database("validate_policy", policy)
    assert proc.returncode == 1, proc.stderr
    assert [e["code"] for e in json.loads(proc.stdout)["errors"]] == ["unknown_strategy"]
    usage = manage_without_database("validate_policy", tmp_path / "missing.json")
    assert usage.returncode == 2 and usage.stdout == "" and "Traceback" not in usage.stderr


def test_invalid_policy_exits_1_with_errors(tmp_path: Path) -> None:
    policy = write_json(tmp_path / "policy.json", {"strategies": ["recovery"], "ttp_port": 9601})
    proc = run(policy)
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["valid"] is False and data["spec"] is None
    assert {(e["code"], e["field"]) for e in data["errors"]} == {
        ("unknown_strategy", "/strategies/0"),
        ("ttp_port_conflict", "/ttp_port"),
    }
    assert all(set(e) >= {"code", "field", "message", "severity"} for e in data["errors"])


def test_policy_from_stdin() -> None:
    proc = run("-", stdin='{"strategies": ["retry"], "fault_scheduling": "off"}')
    assert proc.returncode == 0, proc.stderr
    assert [w["code"] for w in json.loads(proc.stdout)["warnings"]] == ["no_job_level_backstop"]


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    assert_usage_error(run(tmp_path / "absent.json"), "absent.json", "no such file")


def test_broken_json_names_the_position(tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text('{"strategies": ["recover",]}', encoding="utf-8")
    assert_usage_error(run(policy), "policy.json", "line 1 column 27")


def test_broken_yaml_manifest_names_the_position(tmp_path: Path) -> None:
    policy = write_json(tmp_path / "policy.json", {})
    manifest = tmp_path / "job.yaml"
    manifest.write_text("kind: AscendJob\nmetadata: [\n", encoding="utf-8")
    assert_usage_error(run(policy, "--manifest", manifest), "job.yaml", "line 3 column 1")


def test_manifest_without_an_ascendjob_is_a_usage_error(tmp_path: Path) -> None:
    policy = write_json(tmp_path / "policy.json", {})
    manifest = tmp_path / "job.yaml"
    manifest.write_text("kind: ConfigMap\n---\nkind: Service\n", encoding="utf-8")
    assert_usage_error(run(policy, "--manifest", manifest), "job.yaml", "no AscendJob document")


def test_missing_argument_is_a_usage_error() -> None:
    proc = run()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_real_sample_manifest_is_valid(tmp_path: Path, shared_dir: Path) -> None:
    """The kwok sample has a ConfigMap first; the AscendJob document must be picked."""
    policy = write_json(tmp_path / "policy.json", {"strategies": ["recover", "dump"], "fault_retry_times": 3})
    manifest = shared_dir.joinpath(*SAMPLES, "multi_node_schedule-job_kwok_simulator-8x8.yaml")
    proc = run(policy, "--manifest", manifest)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["valid"] is True


def test_manifest_issues_are_merged_into_the_result(tmp_path: Path, shared_dir: Path) -> None:
    """The 2x8 sample has no name and two Masters (hostNetwork too, so force is refused)."""
    policy = write_json(tmp_path / "policy.json", {"strategies": ["recover"], "fault_scheduling": "force"})
    manifest = shared_dir.joinpath(*SAMPLES, "training_910b-job_llama-2x8.yaml")
    proc = run(policy, "--manifest", manifest)
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert [e["code"] for e in data["errors"]] == [
        "manifest_empty_name",
        "manifest_leader_replicas",
        "force_with_host_network",
    ]
    assert data["errors"][1]["field"] == "manifest:/spec/replicaSpecs/Master/replicas"
    assert data["spec"] is None


def test_json_manifest_is_accepted(tmp_path: Path) -> None:
    container = {"name": "ascend", "image": "mindspeed:1"}
    replica = {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [container]}}}
    manifest = write_json(
        tmp_path / "job.json",
        {
            "apiVersion": "mindxdl.gitee.com/v1",
            "kind": "AscendJob",
            "metadata": {"name": "tiny", "labels": {"framework": "pytorch"}},
            "spec": {"replicaSpecs": {"Master": replica}},
        },
    )
    policy = write_json(tmp_path / "policy.json", {"fault_retry_times": 2})
    proc = run(policy, "--manifest", manifest)
    assert proc.returncode == 1
    (error,) = json.loads(proc.stdout)["errors"]
    assert error["code"] == "retry_times_requires_restart_never" and "Master" in error["message"]


@pytest.mark.parametrize("garbage", ["null", "[1, 2]", '"recover"', "1e400"])
def test_non_object_policy_is_a_validation_error_not_a_crash(tmp_path: Path, garbage: str) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(garbage, encoding="utf-8")
    proc = run(policy)
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["errors"][0]["code"] == "not_an_object"

"""``manage.py render_policy``: YAML/JSON output, artifacts, refusals and usage errors, without a database.

Runs the command as manage.py does, in this process where pytest-django refuses every database
connection (``manage_in_process``), and once in a real subprocess with the base settings whose
DATABASE_URL points at a closed port: any ORM access would fail, so passing tests prove the command
needs no database.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.policies import manage_in_process, manage_without_database, seed_job

REPO_ROOT = Path(__file__).resolve().parents[2]
SAMPLES_DIR = REPO_ROOT / "tests" / "fixtures" / "reference" / "samples"
DUMP_73 = {"mindcluster_version": "7.3", "strategies": ["dump"]}


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return manage_in_process("render_policy", *args)


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data) if path.suffix == ".json" else yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.fixture
def job_file(tmp_path: Path) -> Path:
    return write(tmp_path / "job.yaml", seed_job())


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    return write(tmp_path / "policy.json", DUMP_73)


def test_the_real_process_with_base_settings_and_no_database(job_file: Path, policy_file: Path) -> None:
    done = manage_without_database("render_policy", "--manifest", job_file, "--policy", policy_file)
    assert done.returncode == 0, done.stderr
    assert [d["kind"] for d in yaml.safe_load_all(done.stdout)] == ["AscendJob", "ConfigMap"]


def test_yaml_output_has_the_job_then_its_configmap(job_file: Path, policy_file: Path) -> None:
    done = run("--manifest", job_file, "--policy", policy_file)
    assert done.returncode == 0, done.stderr
    documents = list(yaml.safe_load_all(done.stdout))
    assert [d["kind"] for d in documents] == ["AscendJob", "ConfigMap"]
    assert documents[0]["metadata"]["annotations"]["recover-strategy"] == "dump"
    assert documents[1]["metadata"]["name"] == "taskd-manager-gpt-pretrain"
    assert "init_taskd_manager(" in documents[1]["data"]["manager.py"]
    assert "manager.py: |" in done.stdout  # multi-line scripts are readable literal blocks


def test_json_output_is_a_list(job_file: Path, policy_file: Path) -> None:
    done = run("--manifest", job_file, "--policy", policy_file, "--format", "json")
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    assert output["kind"] == "List" and output["apiVersion"] == "v1"
    assert [item["kind"] for item in output["items"]] == ["AscendJob", "ConfigMap"]


def test_artifacts_dir_gets_the_four_files(job_file: Path, policy_file: Path, tmp_path: Path) -> None:
    target = tmp_path / "out" / "artifacts"
    done = run("--manifest", job_file, "--policy", policy_file, "--artifacts", target)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in target.iterdir()) == [
        "Dockerfile.snippet",
        "launcher.sh",
        "manager.py",
        "training-flags.txt",
    ]
    assert "RUN pip3 install $TASKD_WHL" in (target / "Dockerfile.snippet").read_text()
    assert 'if [[ "${RANK}" == 0 ]]; then' in (target / "launcher.sh").read_text()
    assert (target / "training-flags.txt").read_text() == "--enable-high-availability\n"
    compile((target / "manager.py").read_text(), "manager.py", "exec")


def test_preset_without_database(job_file: Path) -> None:
    done = run("--manifest", job_file, "--preset", "in-place")
    assert done.returncode == 0, done.stderr
    job = next(yaml.safe_load_all(done.stdout))
    assert job["metadata"]["annotations"]["recover-strategy"] == "recover-in-place,recover"


def test_preset_follows_the_release_the_job_declares(tmp_path: Path) -> None:
    job = seed_job()
    job["metadata"]["labels"]["mindcluster.io/release"] = "7.1"
    done = run("--manifest", write(tmp_path / "job.yaml", job), "--preset", "process-recover")
    assert done.returncode == 0, done.stderr
    rendered = next(yaml.safe_load_all(done.stdout))
    assert rendered["metadata"]["labels"]["process-recover-enable"] == "on"


def test_multi_document_sample_passes_other_documents_through(tmp_path: Path) -> None:
    sample = SAMPLES_DIR / "multi_node_schedule-job_kwok_simulator-8x8.yaml"
    original = [d for d in yaml.safe_load_all(sample.read_text(encoding="utf-8")) if d]
    done = run("--manifest", sample, "--policy", write(tmp_path / "policy.json", DUMP_73))
    assert done.returncode == 0, done.stderr
    documents = list(yaml.safe_load_all(done.stdout))
    assert [d["kind"] for d in documents] == ["ConfigMap", "AscendJob", "ConfigMap"]
    assert documents[0] == original[0]  # reset-config-<job>, unchanged and first
    assert documents[2]["metadata"]["name"] == "taskd-manager-default-test-8x8"


def test_invalid_manifest_exits_1_with_codes_on_stderr(tmp_path: Path, policy_file: Path) -> None:
    job = seed_job(name="")
    job["spec"]["replicaSpecs"]["Master"]["replicas"] = 2
    done = run("--manifest", write(tmp_path / "bad.yaml", job), "--policy", policy_file)
    assert done.returncode == 1
    assert done.stdout == ""
    report = json.loads(done.stderr)
    assert {e["code"] for e in report["errors"]} == {"manifest_empty_name", "manifest_leader_replicas"}


def test_invalid_policy_exits_1(job_file: Path, tmp_path: Path) -> None:
    policy = write(tmp_path / "p.json", {"mindcluster_version": "7.0", "strategies": ["elastic-training"]})
    done = run("--manifest", job_file, "--policy", policy)
    assert done.returncode == 1
    assert "strategy_not_in_release" in {e["code"] for e in json.loads(done.stderr)["errors"]}


@pytest.mark.parametrize(
    "args",
    [
        ("--manifest", "/nonexistent/job.yaml", "--preset", "dying-gasp"),
        ("--manifest", "{job}", "--policy", "/nonexistent/policy.json"),
        ("--manifest", "{job}", "--preset", "no-such-preset"),
        ("--manifest", "{garbage}", "--preset", "dying-gasp"),
        ("--manifest", "{job}", "--policy", "{garbage}"),
    ],
    ids=["missing-manifest", "missing-policy", "unknown-preset", "bad-yaml", "bad-json"],
)
def test_usage_errors_exit_2_without_traceback(args: tuple[str, ...], job_file: Path, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("key: [unclosed\n{", encoding="utf-8")
    done = run(*(a.format(job=job_file, garbage=garbage) for a in args))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert done.stderr.strip() and len(done.stderr.strip().splitlines()) == 1


def test_policy_and_preset_are_exclusive(job_file: Path, policy_file: Path) -> None:
    done = run("--manifest", job_file, "--policy", policy_file, "--preset", "dying-gasp")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr

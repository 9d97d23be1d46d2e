"""``sim_fault`` / ``simcluster`` commands, the control endpoint and the scenario parser."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from simcluster.management.commands.sim_fault import control_url_from_kubeconfig
from simcluster.scenarios import ScenarioError, parse_scenario
from tests.support import wait_for
from tests.support.sim import create_job, event_reasons, make_job, run_sim_fault

REPO_ROOT = Path(__file__).resolve().parents[2]


def post(url: str, body: bytes, content_type: str = "application/json") -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": content_type}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_sim_fault_injects_through_the_control_endpoint(sim, kube, capsys) -> None:
    job = create_job(kube, make_job("cmd-job"))
    code, out, _ = run_sim_fault(
        "default/cmd-job", "--rank", "1", "--type", "uce", "--control-url", sim.control_url, capsys=capsys
    )
    assert code == 0 and "injected fault-" in out
    assert sim.wait_idle(20)
    assert "RecoverSucceeded" in event_reasons(kube, job)


def test_sim_fault_finds_the_endpoint_from_the_kubeconfig(sim, kube, tmp_path, capsys) -> None:
    create_job(kube, make_job("cmd-kubeconfig"))
    # The convention is API port + 1; point a kubeconfig at (control port - 1) to exercise it.
    control_port = int(sim.control_url.rsplit(":", 1)[1])
    config = tmp_path / "kubeconfig"
    config.write_text(
        json.dumps({"clusters": [{"cluster": {"server": f"http://127.0.0.1:{control_port - 1}"}}]})
    )
    assert control_url_from_kubeconfig(str(config)) == sim.control_url
    code, out, _ = run_sim_fault(
        "default/cmd-kubeconfig", "--type", "node", "--fails", "--kubeconfig", str(config), capsys=capsys
    )
    assert code == 0, out
    assert sim.wait_idle(20)


def test_sim_fault_unknown_job_exits_1_naming_it(sim, capsys) -> None:
    code, _, err = run_sim_fault("default/ghost", "--control-url", sim.control_url, capsys=capsys)
    assert code == 1
    assert "default/ghost" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["default/cmd-job", "--type", "meteor"],
        ["default/cmd-job", "--rank", "minus-one"],
        ["default/cmd-job", "--rank", "-3"],
        ["default/cmd-job", "--level", "Catastrophic"],
        ["a/b/c"],
        ["default/cmd-job", "--code", "not-hex!"],
    ],
)
def test_sim_fault_bad_input_exits_2(sim, capsys, argv: list[str]) -> None:
    code, _, err = run_sim_fault(*argv, "--control-url", sim.control_url, capsys=capsys)
    assert code == 2, err
    assert err.strip()


def test_sim_fault_unreachable_endpoint_is_a_clear_error(capsys) -> None:
    code, _, err = run_sim_fault("default/x", "--control-url", "http://127.0.0.1:9", capsys=capsys)
    assert code == 1 and "cannot reach" in err


def test_control_endpoint_rejects_bad_bodies(sim) -> None:
    status, body = post(f"{sim.control_url}/faults", b"{not json")
    assert status == 400 and "JSON" in body["error"]
    status, body = post(
        f"{sim.control_url}/faults", json.dumps({"job": "default/cmd-job", "rank": "x"}).encode()
    )
    assert status == 400 and "rank" in body["error"]
    status, body = post(f"{sim.control_url}/faults", json.dumps([1, 2]).encode())
    assert status == 400


def test_control_endpoint_runs_scenarios(sim, kube) -> None:
    job = create_job(kube, make_job("cmd-scenario"))
    scenario = (
        b"faults:\n  - {at_s: 0, job: default/cmd-scenario, rank: 1, type: uce, recovers: [false, true]}\n"
    )
    status, body = post(f"{sim.control_url}/scenarios", scenario, "application/yaml")
    assert status == 202 and body["faults"] == 1
    run = sim.scenario_runs[body["id"]]
    assert run.done.wait(10) and not run.errors
    assert sim.wait_idle(20)
    assert [e for e in event_reasons(kube, job) if e.startswith("Recover")] == [
        "RecoverFailed",
        "RecoverSucceeded",
    ]
    status, body = post(f"{sim.control_url}/scenarios", b"faults:\n  - {job: default/nope, rank: 0}\n")
    assert status == 404 and "default/nope" in body["error"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "mapping"),
        ("[1, 2]", "mapping"),
        ("faults: []", "non-empty"),
        ("faults: 3", "non-empty"),
        ("steps: []", "unknown top-level"),
        ("faults: [3]", "faults[0]: expected a mapping"),
        ("faults: [{at_s: -1, job: a/b}]", "faults[0].at_s"),
        ("faults: [{at_s: soon, job: a/b}]", "faults[0].at_s"),
        ("faults: [{job: a/b, type: meteor}]", "faults[0].type"),
        ("faults: [{job: a/b, recovers: [yes, maybe]}]", "faults[0].recovers"),
        ("faults: [{job: a/b, rnak: 1}]", "unknown field"),
        ("faults: [{at_s: 0}]", "faults[0].job"),
        ("faults: {", "not valid YAML"),
    ],
)
def test_scenario_parser_gives_clear_errors(text: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=re.escape(message)):
        parse_scenario(text)


def test_scenario_parser_sorts_by_time() -> None:
    scenario = parse_scenario("faults:\n- {at_s: 5, job: ns/b, rank: 1}\n- {at_s: 1, job: a, type: node}\n")
    assert [(f.at_s, f.spec.namespace, f.spec.job) for f in scenario.faults] == [
        (1.0, "default", "a"),
        (5.0, "ns", "b"),
    ]


def test_simcluster_command_runs_and_stops_on_sigint(tmp_path) -> None:
    kubeconfig = tmp_path / "sim.kubeconfig"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "simcluster",
            "--port",
            "0",
            "--grpc-port",
            "0",
            "--control-port",
            "0",
            "--kubeconfig",
            str(kubeconfig),
            "--clock-speed",
            "100",
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        lines = []
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if "Ctrl-C" in line:
                break
        assert kubeconfig.exists(), "".join(lines)
        assert any(line.startswith("ClusterD gRPC") for line in lines)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
        wait_for(lambda: process.poll() is not None, timeout=5)

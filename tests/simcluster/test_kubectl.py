"""Issue 17: the machine's kubectl (oldest and newest installed) through a scripted session against the
built-in cluster: apply (validated), get with real columns, explain, describe with events after a
fault, logs / logs --previous, server-side apply conflicts, get -w, delete."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.sim import make_job

KUBECTL_DIR = Path("/usr/lib/google-cloud-sdk/bin")


def _kubectls() -> list[Path]:
    found = sorted(
        KUBECTL_DIR.glob("kubectl.1.*"), key=lambda p: tuple(int(x) for x in p.name.split(".")[1:])
    )
    return [found[0], found[-1]] if len(found) > 1 else found


KUBECTLS = _kubectls()
pytestmark = pytest.mark.skipif(not KUBECTLS, reason=f"no kubectl.1.* binary under {KUBECTL_DIR}")


@pytest.fixture(scope="module")
def cluster() -> SimCluster:
    sim = SimCluster(clock_speed=200, seed=3, control_port=0)
    sim.start()
    yield sim
    sim.stop()


def _run(kubectl: Path, kubeconfig: str, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": kubeconfig, "HOME": str(Path(kubeconfig).parent)}
    proc = subprocess.run(
        [str(kubectl), *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    if ok:
        assert proc.returncode == 0, f"kubectl {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def _header(output: str) -> list[str]:
    return output.splitlines()[0].split()


@pytest.mark.parametrize("kubectl", KUBECTLS, ids=[p.name for p in KUBECTLS])
def test_kubectl_session(kubectl: Path, cluster: SimCluster, tmp_path: Path) -> None:
    kc = cluster.kubeconfig_path
    name = f"kc-{kubectl.name.split('.')[-1]}"
    job = make_job(name, workers=3)
    good = tmp_path / "job.yaml"
    good.write_text(yaml.safe_dump(job))

    # apply, validated against the served OpenAPI (no --validate=false): a typo is refused.
    typo = yaml.safe_load(good.read_text())
    typo["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["imagee"] = "x"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(typo))
    refused = _run(kubectl, kc, "apply", "-f", str(bad), ok=False)
    assert (
        refused.returncode != 0
        and 'unknown field "spec.replicaSpecs.Worker.template.spec.containers[0].imagee"' in (refused.stderr)
    )
    assert "created" in _run(kubectl, kc, "apply", "-f", str(good)).stdout

    pods = wait_for(
        lambda: (lambda out: out if out.count("Running") == 4 else None)(
            _run(kubectl, kc, "get", "pods").stdout
        ),
        timeout=20,
        what="4 running pods",
    )
    assert _header(pods) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert f"{name}-worker-0" in pods and "1/1" in pods
    wide = _run(kubectl, kc, "get", "pods", "-o", "wide").stdout
    assert _header(wide)[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    acjobs = _run(kubectl, kc, "get", "acjob", name, "-o", "wide").stdout
    assert _header(acjobs) == ["NAME", "STATE", "AGE"] and "Running" in acjobs
    events = _run(kubectl, kc, "get", "events").stdout
    assert _header(events) == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert "SuccessfulCreatePod" in events and f"pod/{name}-worker-0" in events

    explain = _run(kubectl, kc, "explain", "ascendjob.spec.replicaSpecs").stdout
    assert "KIND:" in explain and "AscendJob" in explain and "template" in explain

    # a pod fault: the pod is recreated; describe lists its events, logs tell the story.
    victim = f"{name}-worker-1"
    time.sleep(2.5)  # a step or two of training before the fault
    cluster.inject_fault("default", name, rank=2, fault_type="node", recovers=True)
    assert cluster.wait_idle(30)
    describe = _run(kubectl, kc, "describe", "pod", victim).stdout
    assert "Events:" in describe and "Events:  <none>" not in describe
    for reason in ("Scheduled", "Started"):
        assert reason in describe
    described_job = _run(kubectl, kc, "describe", "acjob", name).stdout
    assert "FaultDetected" in described_job
    previous = _run(kubectl, kc, "logs", victim, "--previous").stdout
    assert "step 1 | loss" in previous and "fault detected" in previous
    assert "SIGTERM" in previous
    current = _run(kubectl, kc, "logs", victim, "-c", "ascend", "--timestamps").stdout
    assert "[TaskD] pod" in current and "Z [TaskD]" in current
    assert len(_run(kubectl, kc, "logs", victim, "--tail=1").stdout.splitlines()) == 1

    # server-side apply: the label is owned by client-side apply → conflict, then forced.
    ssa = tmp_path / "ssa.yaml"
    ssa.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "mindxdl.gitee.com/v1",
                "kind": "AscendJob",
                "metadata": {"name": name, "labels": {"fault-scheduling": "force"}},
            }
        )
    )
    conflict = _run(kubectl, kc, "apply", "--server-side", "-f", str(ssa), ok=False)
    assert conflict.returncode != 0 and "conflict" in conflict.stderr.lower()
    assert ".metadata.labels.fault-scheduling" in conflict.stderr
    _run(kubectl, kc, "apply", "--server-side", "--force-conflicts", "-f", str(ssa))
    label = _run(kubectl, kc, "get", "acjob", name, "-o", "jsonpath={.metadata.labels.fault-scheduling}")
    assert label.stdout == "force"

    # get -w receives a change.
    env = {**os.environ, "KUBECONFIG": kc, "HOME": str(tmp_path)}
    watch = subprocess.Popen(
        [str(kubectl), "get", "acjob", name, "-w", "--output-watch-events"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        time.sleep(1.5)
        _run(kubectl, kc, "label", "acjob", name, "watched=yes")
        lines: list[str] = []

        def read() -> None:
            for line in watch.stdout:  # header, ADDED, then the change
                lines.append(line)
                if "MODIFIED" in line:
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(10)
        assert any("MODIFIED" in line and name in line for line in lines), lines
    finally:
        watch.terminate()
        watch.wait(5)

    _run(kubectl, kc, "delete", "acjob", name)
    wait_for(
        lambda: name not in _run(kubectl, kc, "get", "pods").stdout + _run(kubectl, kc, "get", "pods").stderr,
        timeout=20,
        what="pods gone",
    )

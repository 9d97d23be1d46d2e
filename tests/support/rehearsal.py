"""The deploy rehearsal's machinery: deploy/'s pods as local processes, probed the way the kubelet does.

A "pod" here is one replica of a Deployment (or the migration Job) started from its rendered manifest:
the container's ``command`` in the repository (the image's WORKDIR), with exactly the environment the
kubelet would give it: the image's ``ENV`` (Dockerfile), then ``envFrom`` (ConfigMap, Secret, read back
from the cluster), then the container's ``env``. What a laptop cannot give each process, the rehearsal
maps, and nothing else:

- the pod's own filesystem: ``/tmp`` (an emptyDir) becomes a directory per pod, the image's
  ``/app/var`` one per rehearsal (static files collected into it as the image build does); every other
  ``volumeMount`` a directory of the pod's: a ``secret`` volume holds the Secret's keys as files
  (``items`` pick and rename them, as the kubelet projects them), read back from the cluster; a Secret
  that is not there leaves the pod unstarted, as the kubelet's ``MountVolume.SetUp failed`` does;
- the pod's own network: a ``containerPort`` becomes a free local port (the command's ``--port`` and
  ``--probe-port``);
- the datastores (``DATABASE_URL``, ``REDIS_URL``) and ClusterD (``CLUSTERD_ADDRESS``) point at the
  test's; a pod that mounts its ServiceAccount token gets, instead of the mounted token, ``KUBECONFIG``
  with a token of that same ServiceAccount (``KUBE_IN_CLUSTER`` stays: the product then uses the
  process's own credentials, apps.cluster.client.load_credentials).

Probes follow the kubelet: HTTP GET with ``Host: <pod IP>:<port>`` (kubernetes pkg/probe/http/
request.go: the host defaults to the pod IP) and ``User-Agent: kube-probe/<version>``, success for
200-399 within ``timeoutSeconds``; exec probes run the command in the pod's environment, success on
exit 0. The startup probe runs every ``periodSeconds`` until it passes or ``failureThreshold`` fails,
then readiness; Ready is the first readiness success.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.deploy import REPO, Doc, main_container, pod_spec
from tests.support.processes import free_port_block

VENV_BIN = Path(sys.executable).parent
# Process-level only: what the image's base layer would have, plus our virtualenv first on PATH.
BASE_ENV = {"PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
PROBE_USER_AGENT = "kube-probe/1.33"


def image_env() -> dict[str, str]:
    """The Dockerfile's ``ENV`` of the product stage (the runtime image's environment)."""
    text = (REPO / "Dockerfile").read_text()
    product = text.split(" AS product\n", 1)[1].split("\nFROM ", 1)[0]
    env: dict[str, str] = {}
    for line in re.findall(r"^ENV (.+)$", product, re.M):
        env.update(pair.split("=", 1) for pair in shlex.split(line))
    return env


def decode_secret(secret: Doc) -> dict[str, str]:
    data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    data.update(secret.get("stringData") or {})
    return data


@dataclass
class Overrides:
    """The only values the rehearsal replaces in a pod's environment (module docstring)."""

    database_url: str
    redis_url: str
    clusterd_address: str
    kubeconfig_for: Callable[[str], Path]  # ServiceAccount name -> kubeconfig of its identity


@dataclass
class Pod:
    component: str
    doc: Doc
    root: Path  # this pod's private files: tmp/ (the emptyDir), logs
    pod_ip: str
    image_var: Path  # the image's /app/var (static files collected at build)
    env: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)  # container port name or number -> local port
    mounts: dict[str, Path] = field(default_factory=dict)  # container mountPath -> this pod's directory
    unmountable: str = ""  # why the kubelet could not mount a volume (the pod never starts)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def log(self) -> Path:
        return self.root / f"{self.component}.log"

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else "(no output)"


def localize(value: str, pod: Pod, image_var: Path) -> str:
    """A path in the container's filesystem, as this pod's directory on this machine."""
    for mount_path in sorted(pod.mounts, key=len, reverse=True):
        if value == mount_path or value.startswith(mount_path + "/"):
            return str(pod.mounts[mount_path]) + value[len(mount_path) :]
    if value == "/tmp" or value.startswith("/tmp/"):
        return str(pod.tmp) + value[len("/tmp") :]
    if value == "/app/var" or value.startswith("/app/var/"):
        return str(image_var) + value[len("/app/var") :]
    return value


@dataclass
class Sources:
    """Where a pod's environment and files come from: the cluster's ConfigMaps and Secrets (by name,
    decoded), the rehearsal's overrides, and the image's /app/var."""

    configmaps: dict[str, dict[str, str]]
    secrets: dict[str, dict[str, str]]
    overrides: Overrides
    image_var: Path


def pod_env(pod: Pod, container: Doc, sources: Sources) -> dict[str, str]:
    configmaps, secrets, overrides = sources.configmaps, sources.secrets, sources.overrides
    env = dict(image_env())
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(configmaps[source["configMapRef"]["name"]])
        if "secretRef" in source:
            env.update(secrets[source["secretRef"]["name"]])
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            ref = item["valueFrom"]
            if "secretKeyRef" in ref:
                env[item["name"]] = secrets[ref["secretKeyRef"]["name"]][ref["secretKeyRef"]["key"]]
            else:
                env[item["name"]] = configmaps[ref["configMapKeyRef"]["name"]][ref["configMapKeyRef"]["key"]]
    # The container's paths become this pod's; the machine's own PATH, HOME and TMPDIR are not
    # container paths and stay as they are (a checkout under /tmp must not become the pod's /tmp).
    env = {
        **BASE_ENV,
        "HOME": str(pod.tmp),
        "TMPDIR": str(pod.tmp),
        **{name: localize(value, pod, sources.image_var) for name, value in env.items()},
    }
    # The overrides, and only these (module docstring).
    env["DATABASE_URL"] = overrides.database_url
    env["REDIS_URL"] = overrides.redis_url
    env["CLUSTERD_ADDRESS"] = overrides.clusterd_address
    # A listening port, made this pod's like the command's --port (pods of one machine share ports).
    if "METRICS_PORT" in env:
        env["METRICS_PORT"] = str(pod.ports[env["METRICS_PORT"]])
    if pod_spec(pod.doc).get("automountServiceAccountToken"):
        env["KUBECONFIG"] = str(overrides.kubeconfig_for(pod_spec(pod.doc)["serviceAccountName"]))
    return env


PORT_FLAGS = ("--port", "--probe-port")  # the listening ports of our commands (uvicorn, serve_admission)


def local_command(command: list[str], pod: Pod, image_var: Path) -> list[str]:
    """The container's command with its paths and listening ports made this pod's."""
    out = [localize(arg, pod, image_var) for arg in command]
    for i, arg in enumerate(out[:-1]):
        if arg in PORT_FLAGS:
            out[i + 1] = str(pod.ports[out[i + 1]])
    return out


def mount_volumes(pod: Pod, container: Doc, secrets: dict[str, dict[str, str]]) -> None:
    """The container's ``volumeMounts`` as directories of this pod (``/tmp`` is ``pod.tmp``); sets
    ``pod.unmountable`` for a Secret (or key) that is not there, in the kubelet's words."""
    volumes = {volume["name"]: volume for volume in pod_spec(pod.doc).get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        volume, path = volumes[mount["name"]], mount["mountPath"]
        if path == "/tmp":
            continue
        target = pod.root / "volumes" / mount["name"]
        target.mkdir(parents=True, exist_ok=True)
        pod.mounts[path] = target
        if "secret" not in volume:
            continue  # an emptyDir: the empty directory is all of it
        name = volume["secret"]["secretName"]
        failed = f'MountVolume.SetUp failed for volume "{mount["name"]}" : '
        if name not in secrets:
            pod.unmountable = failed + f'secret "{name}" not found'
            return
        data = secrets[name]
        for item in volume["secret"].get("items") or [{"key": key, "path": key} for key in data]:
            if item["key"] not in data:
                pod.unmountable = failed + f"references non-existent secret key: {item['key']}"
                return
            (target / item["path"]).write_text(data[item["key"]])


def replica_name(component: str, replica: int) -> str:
    """A Deployment's n-th pod: ``ingester``, ``ingester-1``, ..."""
    return component if replica == 0 else f"{component}-{replica}"


def prepare(component: str, doc: Doc, root: Path, pod_ip: str, sources: Sources, replica: int = 0) -> Pod:
    pod = Pod(component, doc, root / replica_name(component, replica), pod_ip, sources.image_var)
    pod.tmp.mkdir(parents=True, exist_ok=True)
    container = main_container(doc)
    mount_volumes(pod, container, sources.secrets)
    ports = container.get("ports", [])
    # The metrics ports are METRICS_PORT + k in the container: consecutive here too.
    metrics = {p["name"]: p["containerPort"] for p in ports if p.get("name", "").startswith("metrics")}
    base = free_port_block(max(metrics.values()) - min(metrics.values()) + 1) if metrics else 0
    for port in ports:
        if port.get("name") in metrics:
            local = base + port["containerPort"] - min(metrics.values())
        else:
            local = free_port_block(1)
        pod.ports[str(port["containerPort"])] = local
        if "name" in port:
            pod.ports[port["name"]] = local
    pod.env = pod_env(pod, container, sources)
    return pod


def run_to_completion(pod: Pod, container: Doc, image_var: Path, timeout: float) -> int:
    """An init container or a Job's container: run it, return its exit code."""
    with pod.log.open("ab") as log:
        return subprocess.run(
            local_command(container["command"], pod, image_var),
            cwd=REPO,
            env=pod.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        ).returncode


def start(pod: Pod, image_var: Path) -> None:
    command = local_command(main_container(pod.doc)["command"], pod, image_var)
    pod.proc = subprocess.Popen(
        command,
        cwd=REPO,
        env=pod.env,
        stdout=pod.log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: stop() reaches the worker's and decider's children
    )


def stop(*pods: Pod, grace: float = 15) -> None:
    """The kubelet's SIGTERM to every pod's processes at once, SIGKILL to those still running after
    ``grace`` seconds (terminationGracePeriodSeconds): the pods wind down in parallel."""
    running = [pod.proc for pod in pods if pod.proc is not None and pod.proc.poll() is None]
    for proc in running:
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in running:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


# --- probes ------------------------------------------------------------------------------------------
def probe_once(pod: Pod, probe: Doc) -> tuple[bool, str]:
    """One probe as the kubelet runs it: (passed, what it answered)."""
    timeout = float(probe.get("timeoutSeconds", 1))
    if "httpGet" in probe:
        get = probe["httpGet"]
        port = pod.ports[str(get["port"])]
        scheme = get.get("scheme", "HTTP").lower()
        # The kubelet's Host is the pod IP and the container's port (not the local one we mapped it to).
        container_port = next(
            p["containerPort"]
            for p in main_container(pod.doc)["ports"]
            if str(get["port"]) in (p.get("name"), str(p["containerPort"]))
        )
        request = urllib.request.Request(
            f"{scheme}://127.0.0.1:{port}{get.get('path', '/')}",
            headers={
                "Host": f"{pod.pod_ip}:{container_port}",
                "User-Agent": PROBE_USER_AGENT,
                "Accept": "*/*",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return 200 <= response.status < 400, f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:
            return False, f"HTTP {exc.code}: {exc.read()[:300]!r}"
        except OSError as exc:
            return False, f"{type(exc).__name__}: {exc}"
    command = local_command(probe["exec"]["command"], pod, pod.image_var)
    try:
        result = subprocess.run(
            command, cwd=REPO, env=pod.env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout}s"
    return result.returncode == 0, f"exit {result.returncode}: {result.stderr.strip()[-300:]}"


@dataclass
class Readiness:
    component: str
    ready: bool
    seconds: float
    budget: float
    answers: list[str]


def wait_ready(pod: Pod, started: float) -> Readiness:
    """Startup probe until it passes (or fails ``failureThreshold`` times), then readiness until it passes
    within its own threshold; every probe ``periodSeconds`` apart, the first at once (no initialDelay)."""
    container = main_container(pod.doc)
    startup, readiness = container["startupProbe"], container["readinessProbe"]
    budget = startup["periodSeconds"] * startup["failureThreshold"] + readiness[
        "periodSeconds"
    ] * readiness.get("failureThreshold", 3)
    answers: list[str] = []
    for probe in (startup, readiness):
        for _ in range(int(probe.get("failureThreshold", 3))):
            if pod.proc is not None and pod.proc.poll() is not None:
                answers.append(f"process exited {pod.proc.returncode}")
                return Readiness(pod.component, False, time.monotonic() - started, budget, answers)
            passed, answer = probe_once(pod, probe)
            answers.append(answer)
            if passed:
                break
            time.sleep(float(probe["periodSeconds"]))
        else:
            return Readiness(pod.component, False, time.monotonic() - started, budget, answers)
    return Readiness(pod.component, True, time.monotonic() - started, budget, answers)


def kubectl_json(kubectl: Path, kubeconfig: str, *args: str) -> Doc:
    result = subprocess.run(
        [str(kubectl), "--kubeconfig", kubeconfig, *args, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))

"""Follow the README on a clean checkout in a temporary home: the run command comes up, the UI and
the API answer with the printed token, a fault injected into the simulated cluster reaches the
API's event list, and Ctrl-C leaves no process behind.

This builds a fresh virtualenv from the pinned requirements exactly as a new user would (uv's and
pip's caches are shared, as a second checkout on the same machine would share them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow(seconds=120)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def readme_run_command() -> list[str]:
    """The first command of the README's first code block."""
    text = (REPO / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "README.md must start with a bash block holding the two commands"
    first = block.group(1).strip().splitlines()[0].split("#")[0].strip()
    assert first.endswith("bootstrap.py run"), first
    return first.split()


def get(url: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"Token {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def processes_under(path: Path) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(path) in cmdline:
            found.append(f"{proc.name}: {cmdline[:160]}")
    return found


def wait_until(predicate, seconds: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_readme_run_command_on_a_clean_checkout(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is needed to make a clean checkout")
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(REPO), str(checkout)], check=True)
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    env = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")),
        "UV_CACHE_DIR": os.environ.get("UV_CACHE_DIR", str(Path.home() / ".cache" / "uv")),
        "PYTHONUNBUFFERED": "1",
    }
    command = readme_run_command()
    command[0] = sys.executable if command[0] in ("python3", "python") else command[0]
    log_path = tmp_path / "run.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [*command, "--port", str(port)], cwd=checkout, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:

        def ready_output() -> str | None:
            text = log_path.read_text(errors="replace")
            return text if "ready: http" in text else None

        output = wait_until(ready_output, 600, "the run command to print its URL")
        # The key is in a file only its owner may read, never in the console output (issue #24).
        assert re.search(r"API token: in var/demo-token \(owner-only, expires ", output), output
        token_file = checkout / "var" / "demo-token"
        assert token_file.stat().st_mode & 0o777 == 0o600
        token = token_file.read_text().strip()
        assert token not in output
        base = f"http://127.0.0.1:{port}"
        status, _ = get(f"{base}/")
        assert status == 200 or status == 302  # the dashboard, or its login page
        status, _ = get(f"{base}/api/v1/jobs/")
        assert status == 401  # no token, no data
        jobs = wait_until(
            lambda: json.loads(get(f"{base}/api/v1/jobs/", token)[1]).get("results"), 60, "demo jobs adopted"
        )
        job = next(j for j in jobs if j["name"] != "broken-dump")
        fault = subprocess.run(
            [
                str(checkout / ".venv" / "bin" / "python"),
                "manage.py",
                "sim_fault",
                "--settings",
                "controlplane.settings.dev",
                f"{job['namespace']}/{job['name']}",
                "--rank",
                "1",
                "--type",
                "uce",
                "--kubeconfig",
                str(checkout / "var" / "simcluster.kubeconfig"),
            ],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert fault.returncode == 0, fault.stderr
        wait_until(
            lambda: any(
                e["kind"] == "fault.detected"
                for e in json.loads(get(f"{base}/api/v1/jobs/{job['id']}/events/", token)[1])["results"]
            ),
            60,
            "the injected fault in the API's event list",
        )
    finally:
        proc.send_signal(signal.SIGINT)  # what Ctrl-C does
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    time.sleep(1)
    leftovers = processes_under(checkout)
    assert not leftovers, "processes left behind after Ctrl-C:\n" + "\n".join(leftovers)
    assert proc.returncode == 0, log_path.read_text()[-2000:]

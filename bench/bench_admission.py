"""Admission webhook latency at a steady CREATE rate (issue #15): goal p99 <= 50 ms.

A dedicated PostgreSQL database (``bench_admission``, created and dropped here) holds a default
cluster and a namespace default policy. The product's admission server (``manage.py serve_admission``
with ``ADMISSION_WEBHOOK=true``, ``DEBUG=false``: HTTPS, the client presenting the API server's
certificate over keep-alive connections, as kube-apiserver does) answers, in an open loop at
``--rate`` requests per second for ``--seconds`` (latency counted from the *scheduled* send time,
so a stall is not hidden by coordinated omission):

- ``POST /admission/ascendjobs/`` with an ``AdmissionReview`` for a new AscendJob each time (a new
  name and uid: the full path runs -- default lookup, validate, render, JSONPatch, the pending
  admission row; revision 1 is recorded later, when the watcher sees the job);
- the baseline, a bare DRF view returning a constant on the same server (``BENCH_ENDPOINTS=true``),
  at the same rate, so the number says what admission adds over the server's own floor.

Admission runs twice: recording before answering (the default) and after (``ADMISSION_RECORD_ASYNC``).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/bench_admission.py \
        [--rate 50] [--seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from _common import REPO, emit, env_with, free_port, percentile, spawn, stop, wait_port

DB_NAME = "bench_admission"
NAMESPACE = "team-bench"
GOAL_P99_MS = 50.0


def database_url(base: str) -> str:
    parts = urlsplit(base)
    return urlunsplit((parts.scheme, parts.netloc, f"/{DB_NAME}", parts.query, parts.fragment))


def _admin(base: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(base.replace("postgres://", "postgresql://", 1), autocommit=True) as conn:
        conn.execute(sql)


def seed() -> None:
    """Runs in a subprocess on the bench database: the default cluster and a namespace default."""
    import django

    django.setup()
    from apps.admission.services import namespace_default_set
    from apps.audit.actors import Actor
    from apps.jobs.models import Cluster

    cluster = Cluster.objects.create(name="bench", kubeconfig_path="/nonexistent", is_default=True)
    namespace_default_set(
        cluster=cluster,
        namespace=NAMESPACE,
        spec={
            "strategies": ["retry", "recover", "dump"],
            "fault_scheduling": "grace",
            "pod_rescheduling": True,
        },
        actor=Actor(name="bench"),
    )


def review(name: str) -> bytes:
    template = {
        "spec": {
            "containers": [
                {
                    "name": "ascend",
                    "image": "train:latest",
                    "resources": {
                        "requests": {"huawei.com/Ascend910": 8},
                        "limits": {"huawei.com/Ascend910": 8},
                    },
                }
            ]
        }
    }
    job = {
        "apiVersion": "mindxdl.gitee.com/v1",
        "kind": "AscendJob",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"framework": "pytorch", "ring-controller.atlas": "ascend-910b"},
        },
        "spec": {
            "schedulerName": "volcano",
            "runPolicy": {"schedulingPolicy": {"minAvailable": 5, "queue": "default"}},
            "replicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "Never", "template": template},
                "Worker": {"replicas": 4, "restartPolicy": "Never", "template": template},
            },
        },
    }
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "mindxdl.gitee.com", "version": "v1", "kind": "AscendJob"},
            "resource": {"group": "mindxdl.gitee.com", "version": "v1", "resource": "ascendjobs"},
            "namespace": NAMESPACE,
            "operation": "CREATE",
            "object": job,
        },
    }
    return json.dumps(body).encode()


def client_tls(tls_dir: str) -> Any:
    import ssl

    context = ssl.create_default_context(cafile=f"{tls_dir}/server-ca.crt")
    context.load_cert_chain(f"{tls_dir}/client.crt", f"{tls_dir}/client.key")
    return context


async def open_loop(port: int, rate: float, seconds: float, admission: bool, tls_dir: str) -> dict[str, Any]:
    import aiohttp

    latencies: list[float] = []
    statuses: dict[int, int] = {}
    patched = 0
    base = f"https://127.0.0.1:{port}"
    connector = aiohttp.TCPConnector(limit=64, ssl=client_tls(tls_dir))
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(scheduled: float, index: int) -> None:
            nonlocal patched
            await asyncio.sleep(max(0.0, scheduled - time.monotonic()))
            if admission:
                request = session.post(
                    f"{base}/admission/ascendjobs/",
                    data=review(f"job-{index:06d}-{uuid.uuid4().hex[:4]}"),
                    headers={"Content-Type": "application/json"},
                )
            else:
                request = session.get(f"{base}/api/v1/_bench/constant/")
            async with request as resp:
                body = await resp.read()
                statuses[resp.status] = statuses.get(resp.status, 0) + 1
                if admission and resp.status == 200 and b'"patch"' in body:
                    patched += 1
            latencies.append(time.monotonic() - scheduled)

        start = time.monotonic() + 0.2
        total = int(rate * seconds)
        await asyncio.gather(*(one(start + i / rate, i) for i in range(total)))
    ms = [v * 1000 for v in latencies]
    return {
        "requests": len(ms),
        "statuses": {str(k): v for k, v in statuses.items()},
        "patched": patched,
        "p50_ms": round(percentile(ms, 50), 2),
        "p99_ms": round(percentile(ms, 99), 2),
        "max_ms": round(max(ms), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=50.0, help="CREATE reviews per second (default 50)")
    parser.add_argument("--seconds", type=float, default=60.0, help="duration of each run (default 60)")
    parser.add_argument("--seed-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.seed_only:
        seed()
        return
    base = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    _admin(base, f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
    _admin(base, f'CREATE DATABASE "{DB_NAME}"')
    env = env_with(
        DATABASE_URL=database_url(base),
        DJANGO_SETTINGS_MODULE="controlplane.settings.base",
        DEBUG="false",
        BENCH_ENDPOINTS="true",
        SECRET_KEY="bench-" + uuid.uuid4().hex,
        DB_CONN_MAX_AGE="0",
    )
    results: dict[str, dict[str, Any]] = {}
    try:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=REPO, env=env, check=True
        )
        subprocess.run([sys.executable, __file__, "--seed-only"], cwd=REPO, env=env, check=True)
        tls_dir = tempfile.mkdtemp(prefix="bench-admission-tls-")
        subprocess.run(
            [sys.executable, "manage.py", "admission_dev_certs", tls_dir],
            cwd=REPO,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        env.update(
            ADMISSION_WEBHOOK="true",
            ADMISSION_TLS_CERT_FILE=f"{tls_dir}/server.crt",
            ADMISSION_TLS_KEY_FILE=f"{tls_dir}/server.key",
            ADMISSION_CLIENT_CA_FILE=f"{tls_dir}/client-ca.crt",
        )
        for mode in ("sync", "async"):
            results.update(run_mode(env, mode, args.rate, args.seconds, tls_dir))
    finally:
        _admin(base, f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
    for name, numbers in results.items():
        print(f"{name:>16}: {numbers}")
    sync, fast = results["admission-sync"], results["admission-async"]
    emit(
        {
            "bench": "admission",
            "rate": args.rate,
            "seconds": args.seconds,
            "p50_ms": sync["p50_ms"],
            "p99_ms": sync["p99_ms"],
            "async_p50_ms": fast["p50_ms"],
            "async_p99_ms": fast["p99_ms"],
            "baseline_p50_ms": results["baseline"]["p50_ms"],
            "baseline_p99_ms": results["baseline"]["p99_ms"],
            "patched": sync["patched"] + fast["patched"],
            "requests": sync["requests"] + fast["requests"],
            "goal_p99_ms": GOAL_P99_MS,
            "ok": sync["p99_ms"] <= GOAL_P99_MS,
        }
    )


def run_mode(
    env: dict[str, str], mode: str, rate: float, seconds: float, tls_dir: str
) -> dict[str, dict[str, Any]]:
    """One server per mode: ADMISSION_RECORD_ASYNC false (the default) or true; the baseline once."""
    port = free_port()
    proc = spawn(
        [sys.executable, "manage.py", "serve_admission", "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO,
        env={**env, "ADMISSION_RECORD_ASYNC": "true" if mode == "async" else "false"},
        stdout=subprocess.DEVNULL,
    )
    out: dict[str, dict[str, Any]] = {}
    try:
        wait_port(port, 60)
        asyncio.run(open_loop(port, 20, 2, True, tls_dir))  # warm-up: imports, connections
        if mode == "sync":
            out["baseline"] = asyncio.run(open_loop(port, rate, seconds, False, tls_dir))
        out[f"admission-{mode}"] = asyncio.run(open_loop(port, rate, seconds, True, tls_dir))
    finally:
        stop(proc)
    return out


if __name__ == "__main__":
    main()

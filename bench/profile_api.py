"""Where an API request's time goes: queries per request, mean time in-process, and a cProfile top list.

Seeds the same world as ``bench_api.py`` (jobs with an applied policy, a non-superuser editor behind
the per-namespace visibility filter) in a database of its own, then sends each endpoint through
Django's test client in this process — no server, no network — so the figures are the view's own:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/profile_api.py \
        [--jobs 10000] [--requests 200] [--top 15] [--endpoints bare,detail,policy,list]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import emit
from bench_api import bench_database_url, bench_env, drop_database, endpoint_paths, recreate_database, seed


def _recorder(queries: list[str]) -> Callable[..., Any]:
    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        queries.append(sql)
        return execute(sql, params, many, context)

    return record


def profile_endpoints(
    token: str, job_ids: list[int], requests: int, top: int, names: list[str], hot: int
) -> dict[str, Any]:
    import django

    django.setup()
    from django.db import connection
    from django.test import Client

    if hot:
        # Requests pick among ``hot`` jobs whose in-effect views are cached first, as bench_api.py
        # reads every job once: what a request costs once the fleet's views have been read.
        from apps.jobs.models import TrainingJob
        from apps.policies.in_effect import in_effect

        job_ids = job_ids[:hot]
        for job in TrainingJob.objects.filter(pk__in=job_ids).select_related("current_revision"):
            in_effect(job)
    endpoints = endpoint_paths(job_ids)
    endpoints["list_sorted"] = lambda: "/api/v1/jobs/?limit=50&ordering=-could_save"
    # The floor of any authenticated endpoint: token, throttles, the API root's empty work.
    endpoints["root"] = lambda: "/api/v1/"
    client = Client(
        HTTP_AUTHORIZATION=f"Token {token}", HTTP_ACCEPT="application/json", HTTP_HOST="127.0.0.1"
    )
    out: dict[str, Any] = {}
    for name in names:
        paths = endpoints[name]
        for _ in range(20):  # warm up
            assert client.get(paths()).status_code == 200, paths()
        queries: list[str] = []
        with connection.execute_wrapper(_recorder(queries)):
            client.get(paths())
        started, cpu_started = time.perf_counter(), time.process_time()
        for _ in range(requests):
            client.get(paths())
        mean_ms = (time.perf_counter() - started) * 1000 / requests
        cpu_ms = (time.process_time() - cpu_started) * 1000 / requests
        profiler = cProfile.Profile(time.process_time)  # CPU: waits on a loaded machine would swamp it
        profiler.enable()
        for _ in range(requests):
            client.get(paths())
        profiler.disable()
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text)
        stats.sort_stats("cumulative").print_stats(r"/(apps|controlplane|mindcluster)/", top)
        stats.sort_stats("tottime").print_stats(top)
        if os.environ.get("PROFILE_CALLEES"):
            stats.print_callees(os.environ["PROFILE_CALLEES"])
        out[name] = {"queries": len(queries), "mean_ms": round(mean_ms, 2), "cpu_ms": round(cpu_ms, 2)}
        print(f"== {name}: {len(queries)} queries, {mean_ms:.2f} ms/request in-process, {cpu_ms:.2f} ms CPU")
        for sql in queries:
            print("   SQL", sql[:400])
        print(text.getvalue())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--endpoints", default="bare,detail,policy,list")
    parser.add_argument("--database", default="bench_profile")
    parser.add_argument("--keep", action="store_true", help="keep the database (and reuse it next time)")
    parser.add_argument(
        "--hot",
        type=int,
        default=1000,
        help="detail and policy read these many jobs, their in-effect views cached first (0: all, cold)",
    )
    parser.add_argument("--in-process", metavar="IDS_FILE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.in_process:
        token, ids_file = os.environ["BENCH_TOKEN"], args.in_process  # a token may start with "-"
        with open(ids_file) as f:
            job_ids = [int(x) for x in f.read().split()]
        emit(
            {
                "bench": "profile_api",
                **profile_endpoints(
                    token, job_ids, args.requests, args.top, args.endpoints.split(","), args.hot
                ),
            }
        )
        return
    import json
    import subprocess
    import sys
    import tempfile

    base_url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    db_url = bench_database_url(base_url, args.database)
    env = bench_env(db_url)
    kept = Path(tempfile.gettempdir()) / f"{args.database}.seed.json"
    try:
        if args.keep and kept.exists():
            token, job_ids = json.loads(kept.read_text())  # the database kept by the last --keep run
        else:
            recreate_database(base_url, args.database)
            token, job_ids = seed(env, args.jobs)
            if args.keep:
                kept.write_text(json.dumps([token, job_ids]))
        with tempfile.NamedTemporaryFile("w", suffix=".ids", delete=False) as f:
            f.write(" ".join(map(str, job_ids)))
        argv = [
            sys.executable,
            __file__,
            "--in-process",
            f.name,
            "--requests",
            str(args.requests),
            "--top",
            str(args.top),
            "--endpoints",
            args.endpoints,
            "--hot",
            str(args.hot),
        ]
        subprocess.run(argv, env={**env, "BENCH_TOKEN": token}, check=True)
        os.unlink(f.name)
    finally:
        if not args.keep:
            kept.unlink(missing_ok=True)
            drop_database(base_url, args.database)


if __name__ == "__main__":
    main()

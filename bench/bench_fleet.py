"""Benchmark: the fleet API (issue #26) over stored summaries.

Run ``.venv/bin/python bench/bench_fleet.py [--jobs 2000] [--days 30] [--iterations 100]``; the issue's
size is ``--jobs 100000 --days 90`` (about 900,000 job-days with incidents at the default
``--incident-rate 0.1``, i.e. ≥ 1,000,000 events behind them). PostgreSQL from ``BENCH_DATABASE_URL``
(default ``postgres://postgres@127.0.0.1:5432/bench_fleet``, dropped and re-created).

Seeds ``--clusters`` clusters x ``--namespaces`` namespaces each, the jobs spread over them, and for
every day of ``--days``: each job's incidents (a ``JobDay`` for a share ``--incident-rate`` of the jobs)
and every namespace's ``NamespaceDay`` (the sum of its job-days, the NPU time scheduled), the way
``apps.fleet.summaries`` keeps them. Then measures in-process (Django test client, real PostgreSQL):

- ``GET /api/v1/fleet/`` for 7 days, the whole window, one cluster, as a superuser and as a viewer of
  a fifth of the namespaces: median and p99 (goal p99 ≤ 500 ms at 100,000 jobs x 90 days);
- the baseline in the same run: a bare DRF view returning a constant (``BENCH_ENDPOINTS=true``).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import emit, fresh_database, product_env, summary, timed_ms

GOAL_P99_MS = 500.0
KINDS = ("uce", "hccl", "node", "normal")
PATHS = (  # (strategies, attempts, outcome, detect s, decide s, recover s)
    (["retry"], [{"strategy": "retry", "outcome": "succeeded"}], "recovered", 4, 0, 8),
    (["recover"], [{"strategy": "recover", "outcome": "succeeded"}], "recovered", 5, 0, 45),
    (
        ["job-rescheduling"],
        [{"strategy": "job-rescheduling", "outcome": "rescheduled"}],
        "rescheduled",
        5,
        1,
        150,
    ),
    (["recover"], [{"strategy": "recover", "outcome": "failed"}], "failed", 5, 0, 60),
)


def seed(args: argparse.Namespace) -> tuple[Any, Any, int]:
    from django.contrib.auth.models import User

    from apps.accounts.models import NamespaceGrant, Role
    from apps.fleet.figures import Tally
    from apps.fleet.models import JobDay, NamespaceDay
    from apps.jobs.models import Cluster, TrainingJob

    rng = random.Random(26)
    clusters = Cluster.objects.bulk_create([Cluster(name=f"c{i:02d}") for i in range(args.clusters)])
    scopes = [(c, f"ns-{n:02d}") for c in clusters for n in range(args.namespaces)]
    jobs = TrainingJob.objects.bulk_create(
        [
            TrainingJob(
                cluster=scopes[i % len(scopes)][0],
                namespace=scopes[i % len(scopes)][1],
                name=f"job-{i:06d}",
                replicas={"Master": 1, "Worker": rng.choice((0, 1, 3, 7))},
                npus_per_pod=8,
            )
            for i in range(args.jobs)
        ],
        batch_size=5_000,
    )
    today = datetime.now(UTC).date()
    job_days = 0
    for d in range(args.days):
        day = today - timedelta(days=d)
        opened = datetime.combine(day, datetime.min.time(), tzinfo=UTC) + timedelta(hours=12)
        per_scope: dict[tuple[int, str], Tally] = {}
        rows = []
        for job in rng.sample(jobs, int(len(jobs) * args.incident_rate)):
            npus = job.npus_per_pod * sum(job.replicas.values())
            tally = Tally()
            for _ in range(rng.choice((1, 1, 1, 2))):
                strategies, attempts, outcome, detect, decide, recover = rng.choice(PATHS)
                total = detect + decide + recover
                tally.add_incident(
                    {
                        "opened_at": opened,
                        "closed_at": opened + timedelta(seconds=total),
                        "outcome": outcome,
                        "fault": {"types": [rng.choice(KINDS)]},
                        "strategies": strategies,
                        "attempts": attempts,
                        "detect_ms": detect * 1000,
                        "decide_ms": decide * 1000,
                        "recover_ms": recover * 1000,
                    },
                    npus,
                )
            rows.append(
                JobDay(
                    job=job,
                    day=day,
                    cluster_id=job.cluster_id,
                    namespace=job.namespace,
                    npus=npus,
                    **tally.fields(),
                )
            )
            per_scope.setdefault((job.cluster_id, job.namespace), Tally()).add(tally)
        JobDay.objects.bulk_create(rows, batch_size=5_000)
        job_days += len(rows)
        per_job_npu_s = 86_400 * 24  # an average job: 3 pods x 8 NPUs, the whole day
        NamespaceDay.objects.bulk_create(
            [
                NamespaceDay(
                    cluster=c,
                    namespace=ns,
                    day=day,
                    npu_s_scheduled=per_job_npu_s * args.jobs / len(scopes),
                    jobs=args.jobs // len(scopes),
                    **per_scope.get((c.pk, ns), Tally()).fields(),
                )
                for c, ns in scopes
            ],
            batch_size=5_000,
        )
    root = User.objects.create_superuser("bench", password="bench")
    viewer = User.objects.create_user("viewer", password="viewer")
    NamespaceGrant.objects.bulk_create(
        [
            NamespaceGrant(role=Role.VIEWER, user=viewer, cluster=c, namespace=ns)
            for c, ns in scopes[:: max(1, 5)]
        ]
    )
    return root, viewer, job_days


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--namespaces", type=int, default=10, help="per cluster")
    parser.add_argument(
        "--incident-rate", type=float, default=0.1, help="share of jobs with incidents per day"
    )
    parser.add_argument("--iterations", type=int, default=30)
    args = parser.parse_args()
    url = fresh_database("bench_fleet")
    os.environ.update(
        product_env(url, ALLOWED_HOSTS="testserver,127.0.0.1,localhost", BENCH_ENDPOINTS="true")
    )
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from rest_framework.test import APIClient

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    root, viewer, job_days = seed(args)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    seeded_s = time.perf_counter() - started

    def client_for(user: Any) -> APIClient:
        client = APIClient()
        client.force_authenticate(user)
        return client

    def getter(client: APIClient, path: str) -> Any:
        def call() -> None:
            response = client.get(path)
            assert response.status_code == 200, response.content[:300]

        return call

    as_root, as_viewer = client_for(root), client_for(viewer)
    # key → (what, the request)
    cases = {
        "week": ("7 days", getter(as_root, "/api/v1/fleet/")),
        "window": (f"{args.days} days", getter(as_root, f"/api/v1/fleet/?window_days={args.days}")),
        "cluster": (
            f"{args.days} days, one cluster",
            getter(as_root, f"/api/v1/fleet/?window_days={args.days}&cluster=c00"),
        ),
        "viewer": (
            f"{args.days} days, viewer of 1/5",
            getter(as_viewer, f"/api/v1/fleet/?window_days={args.days}"),
        ),
    }
    baseline = summary(timed_ms(getter(APIClient(), "/api/v1/_bench/constant/"), args.iterations, warmup=5))
    results = {key: summary(timed_ms(call, args.iterations, warmup=2)) for key, (_, call) in cases.items()}
    body = as_root.get(f"/api/v1/fleet/?window_days={args.days}").json()
    size_kb = len(as_root.get(f"/api/v1/fleet/?window_days={args.days}").content) / 1024

    print(
        f"fleet API: {args.jobs} jobs in {args.clusters} x {args.namespaces} namespaces, {args.days} days, "
        f"{job_days} job-days with incidents ({body['total']['faults']['total']} incidents), "
        f"seeded in {seeded_s:.0f} s"
    )
    print(f"  baseline, a bare DRF view: median {baseline['median']:.2f} ms, p99 {baseline['p99']:.2f} ms")
    for key, figures in results.items():
        print(
            f"  {cases[key][0]:<28} median {figures['median']:7.1f} ms  p99 {figures['p99']:7.1f} ms  "
            f"= {figures['median'] / baseline['median']:.0f}x the baseline's median "
            f"(goal p99 <= {GOAL_P99_MS:.0f} ms)"
        )
    print(f"  response over the whole window: {size_kb:.0f} KB")
    worst = max(r["p99"] for r in results.values())
    emit(
        {
            "bench": "fleet",
            "jobs": args.jobs,
            "days": args.days,
            "job_days": job_days,
            "incidents": body["total"]["faults"]["total"],
            "baseline_median_ms": round(baseline["median"], 3),
            **{
                f"{name.replace(' ', '_').replace(',', '')}_p50_ms": round(r["median"], 1)
                for name, r in results.items()
            },
            **{
                f"{name.replace(' ', '_').replace(',', '')}_p99_ms": round(r["p99"], 1)
                for name, r in results.items()
            },
            "worst_p99_ms": round(worst, 1),
            "response_kb": round(size_kb, 1),
            "goal_p99_ms": GOAL_P99_MS,
            "goals_met": worst <= GOAL_P99_MS,
        }
    )


if __name__ == "__main__":
    main()

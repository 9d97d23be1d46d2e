"""Benchmark: the fleet API (issue #26) over stored summaries.

Run ``.venv/bin/python bench/bench_fleet.py [--jobs 2000] [--days 30] [--iterations 30] [--reuse]``; the
issue's size is ``--jobs 100000 --days 90`` (250,000 closed incidents of four events each: 1,000,000
events). PostgreSQL from ``BENCH_DATABASE_URL`` (default ``postgres://postgres@127.0.0.1:5432/bench_fleet``).

Seeds ``--clusters`` clusters x ``--namespaces`` namespaces each with the jobs spread over them, then
``--incidents`` closed incidents (default jobs x days / 36) at random times of the window, each with
its four events (fault, training stopped, strategy chosen, the end), with ``COPY``; then the summaries
from those incidents with the product's own ``apps.fleet.summaries.rebuild`` (what ``manage.py
fleet_rebuild`` runs), and ``VACUUM ANALYZE``. At 100,000 jobs x 90 days that takes ~2 min for the rows
and ~6 min for the rebuild on a loaded 2-core machine: ``--reuse`` keeps the database and uses it
again when it holds the same seed (``--rebuild`` recounts its summaries, after a change to them).
Without ``--reuse`` the database is dropped at the end. Then measures in-process (Django test
client, real PostgreSQL):

- ``GET /api/v1/fleet/`` for 7 days, the whole window, one cluster, as a superuser and as a viewer of
  a fifth of the namespaces: median and p99 (goal p99 ≤ 500 ms at 100,000 jobs x 90 days);
- the baseline in the same run: a bare DRF view returning a constant (``BENCH_ENDPOINTS=true``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import create_database, emit, job_row, product_env, summary, timed_ms

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


def seed(args: argparse.Namespace) -> dict[str, Any]:
    """Jobs, their closed incidents and every incident's events, in bulk; then the summaries.

    Jobs go in with ``bulk_create``; incidents and events with PostgreSQL's ``COPY`` (1,000,000 rows in
    well under a minute, where ``bulk_create`` takes several). The summaries are then made the way
    ``manage.py fleet_rebuild`` makes them (``apps.fleet.summaries.rebuild``), from the stored incidents:
    the figures the view sums are the product's own, not the benchmark's.
    """
    from django.contrib.auth.models import User
    from django.db import connection

    from apps.accounts.models import NamespaceGrant, Role
    from apps.jobs.models import Cluster, TrainingJob

    rng = random.Random(26)
    now = datetime.now(UTC)
    clusters = Cluster.objects.bulk_create(
        [Cluster(name=f"c{i:02d}", kubeconfig_path="/nonexistent") for i in range(args.clusters)]
    )
    scopes = [(c, f"ns-{n:02d}") for c in clusters for n in range(args.namespaces)]
    created = now - timedelta(days=args.days + 1)
    jobs = TrainingJob.objects.bulk_create(
        [
            job_row(
                scopes[i % len(scopes)][0],
                scopes[i % len(scopes)][1],
                f"job-{i:06d}",
                rng.choice((0, 1, 3, 7)),
            )
            for i in range(args.jobs)
        ],
        batch_size=5_000,
    )
    TrainingJob.objects.update(created_at=created)
    # Incidents spread uniformly over the window; each job's numbered and sequenced in time order.
    span_s = args.days * 86_400 - 3_600
    per_job: dict[int, list[float]] = {}
    for _ in range(args.incidents):
        per_job.setdefault(rng.randrange(len(jobs)), []).append(rng.uniform(0, span_s))
    start = now - timedelta(days=args.days) + timedelta(minutes=30)
    jobs_by_index = {jobs[index].pk: sorted(offsets) for index, offsets in per_job.items()}
    incident_rows_, event_rows = incident_rows(jobs_by_index, start, rng)
    with connection.cursor() as outer:
        cursor = outer.cursor  # psycopg's own, for COPY (one at a time on a connection)
        for table, columns, rows in (
            ("events_incident", INCIDENT_COLUMNS, incident_rows_),
            ("events_jobevent", EVENT_COLUMNS, event_rows),
        ):
            with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
    incidents, events = len(incident_rows_), len(event_rows)
    User.objects.create_superuser("bench", password="bench")
    viewer = User.objects.create_user("viewer", password="viewer")
    NamespaceGrant.objects.bulk_create(
        [NamespaceGrant(role=Role.VIEWER, user=viewer, cluster=c, namespace=ns) for c, ns in scopes[::5]]
    )
    return {"jobs": len(jobs), "incidents": incidents, "events": events}


INCIDENT_COLUMNS = (
    "job_id",
    "number",
    "opened_at",
    "detected_at",
    "decided_at",
    "closed_at",
    "outcome",
    "fault",
    "strategies",
    "attempts",
    "ranks",
    "nodes",
    "decisions",
    "detect_ms",
    "decide_ms",
    "recover_ms",
    "first_seq",
    "last_seq",
    "updated_at",
)
EVENT_COLUMNS = (
    "job_id",
    "seq",
    "kind",
    "severity",
    "message",
    "source",
    "dedupe_key",
    "data",
    "occurred_at",
    "stored_at",
)


def incident_rows(
    offsets: dict[int, list[float]], start: datetime, rng: random.Random
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """``COPY`` rows: each job's closed incidents (``offsets``: seconds after ``start``, ascending),
    numbered and sequenced in time order, and their events."""
    incidents: list[tuple[Any, ...]] = []
    events: list[tuple[Any, ...]] = []
    for job_id, seconds in offsets.items():
        seq = 0
        for number, offset in enumerate(seconds, start=1):
            row, its_events = _incident(job_id, number, seq, start + timedelta(seconds=offset), rng)
            incidents.append(row)
            events.extend(its_events)
            seq += len(its_events)
    return incidents, events


def _incident(
    job_id: int, number: int, seq: int, opened: datetime, rng: random.Random
) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
    """One closed incident's row and its four events (fault, stopped, chosen, the end)."""
    strategies, attempts, outcome, detect, decide, recover = rng.choice(PATHS)
    kind = rng.choice(KINDS)
    stopped = opened + timedelta(seconds=detect)
    chosen = stopped + timedelta(seconds=decide)
    closed = chosen + timedelta(seconds=recover + rng.randint(0, 30))
    end_kind = {"recovered": "recovery.succeeded", "rescheduled": "job.rescheduled"}.get(
        outcome, "recovery.failed"
    )
    steps = [
        (opened, "fault.detected", "error", {"code": "80C98000", "fault_type": kind, "ranks": [0]}),
        (stopped, "training.stopped", "warning", {"ranks": [0]}),
        (chosen, "strategy.chosen", "info", {"strategy": strategies[0]}),
        (closed, end_kind, "info", {"strategy": strategies[0]}),
    ]
    events = [
        (job_id, seq + i + 1, k, sev, k, "ingest", "", json.dumps(data), at, at)
        for i, (at, k, sev, data) in enumerate(steps)
    ]
    incident = (
        job_id,
        number,
        opened,
        stopped,
        chosen,
        closed,
        outcome,
        json.dumps({"types": [kind]}),
        json.dumps(strategies),
        json.dumps(attempts),
        "[]",
        "[]",
        "[]",
        int((stopped - opened).total_seconds() * 1000),
        int((chosen - stopped).total_seconds() * 1000),
        int((closed - chosen).total_seconds() * 1000),
        seq + 1,
        seq + len(steps),
        closed,
    )
    return incident, events


def _database(args: argparse.Namespace) -> tuple[str, bool]:
    """The benchmark's database URL, and whether it already holds this seed (``--reuse``)."""
    import psycopg

    url = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench_fleet")
    if args.reuse:
        try:
            with psycopg.connect(url) as conn:
                row = conn.execute("SELECT args FROM bench_fleet_seed").fetchone()
            if row and json.loads(row[0]) == _seed_key(args):
                return url, True
        except psycopg.Error:
            pass  # no database or no seed yet: make one
    create_database(url)
    return url, False


def _seed_key(args: argparse.Namespace) -> dict[str, Any]:
    return {k: getattr(args, k) for k in ("jobs", "days", "incidents", "clusters", "namespaces")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--namespaces", type=int, default=10, help="per cluster")
    parser.add_argument(
        "--incidents", type=int, default=0, help="closed incidents, 4 events each (default: jobs x days / 36)"
    )
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument(
        "--reuse", action="store_true", help="keep the seeded database, and use it if it holds this seed"
    )
    parser.add_argument("--rebuild", action="store_true", help="with --reuse: recount the summaries anyway")
    args = parser.parse_args()
    args.incidents = args.incidents or args.jobs * args.days // 36
    url, reused = _database(args)
    os.environ.update(
        product_env(url, ALLOWED_HOSTS="testserver,127.0.0.1,localhost", BENCH_ENDPOINTS="true")
    )
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from rest_framework.test import APIClient

    from apps.events.models import JobEvent
    from apps.fleet.models import JobDay
    from apps.fleet.summaries import rebuild

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    if not reused:
        seeded = seed(args)
        seed_s = time.perf_counter() - started
        print(f"seeded {seeded} in {seed_s:.0f} s", flush=True)
    if not reused or args.rebuild:
        started = time.perf_counter()
        rebuilt = rebuild(since=(datetime.now(UTC) - timedelta(days=args.days)).date())
        print(f"summaries rebuilt from the incidents: {rebuilt} in {time.perf_counter() - started:.0f} s")
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")  # as autovacuum would after the load
            cursor.execute("DROP TABLE IF EXISTS bench_fleet_seed")
            cursor.execute("CREATE TABLE bench_fleet_seed (args text)")
            cursor.execute("INSERT INTO bench_fleet_seed VALUES (%s)", [json.dumps(_seed_key(args))])
    root, viewer = User.objects.get(username="bench"), User.objects.get(username="viewer")
    events = JobEvent.objects.count()
    job_days = JobDay.objects.count()

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
        f"{job_days} job-days with incidents ({body['total']['faults']['total']} incidents, "
        f"{events} events stored){' (seed reused)' if reused else ''}; load average {os.getloadavg()}"
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
            "events": events,
            "loadavg": [round(x, 2) for x in os.getloadavg()],
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
    if not args.reuse:
        connection.close()
        drop_database(url)


def drop_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()

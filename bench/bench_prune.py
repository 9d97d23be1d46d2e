"""Benchmark: pruning 1,000,000 old events while the ingest path stores a live stream (issue #26).

    .venv/bin/python bench/bench_prune.py [--old-events 1000000] [--rate 50] [--baseline-s 10]

A database of its own (``BENCH_DATABASE_URL``, default ``bench_prune`` on the local server; created
and dropped here) gets ``--old-jobs`` jobs with ``--old-events`` events and their incidents (four
events each), all stored 100 days ago (past the 92-day retention), with ``COPY``; then ``VACUUM
ANALYZE``. A private Redis takes the broadcasts.

Then, in this process, a live stream: ``--rate`` events a second spread over ``--live-jobs`` other
jobs, each stored through ``apps.events.services.event_record_many`` (the ingester's storing path:
the job lock, the next seq, incidents and budget followed, the broadcast after commit) in its own
transaction, at a fixed schedule. First ``--baseline-s`` seconds with nothing else running (the
baseline), then the retention task (``fleet.prune_history``'s function, ``apps.fleet.retention``) runs
in a separate process, as the Celery worker would run it, until it has deleted everything past the
window; the stream keeps going throughout. Reported: each store's latency (call → committed), and
the gap between one store's commit and the next one's (the stream runs at a fixed schedule, so
a gap much longer than ``1 / rate`` is a stall: a store that waited on a lock, or a stream that could
not keep the pace), p50 / p99 / max, during the prune and in the baseline. Goal: no stall over 1 s
(the longest store and the longest gap ≤ 1,000 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, create_database, emit, percentile, product_env, spawn, start_redis, stop
from bench_fleet import EVENT_COLUMNS, INCIDENT_COLUMNS, drop_database, incident_rows

GOAL_MAX_STALL_MS = 1_000.0
PRUNE = (
    "import django, json, time; django.setup(); from apps.fleet.retention import prune_history; "
    "t = time.perf_counter(); r = prune_history(); "
    "print(json.dumps({'report': r, 'seconds': time.perf_counter() - t}))"
)


def seed(args: argparse.Namespace) -> dict[str, int]:
    """Old jobs with old incidents and events (``COPY``), and the live jobs (no history)."""
    from _common import job_row
    from django.db import connection

    from apps.jobs.models import Cluster, TrainingJob

    rng = random.Random(26)
    cluster = Cluster.objects.create(name="c00", kubeconfig_path="/nonexistent")
    old = TrainingJob.objects.bulk_create(
        [job_row(cluster, "old", f"old-{i:05d}", 1) for i in range(args.old_jobs)], batch_size=5_000
    )
    TrainingJob.objects.bulk_create(
        [job_row(cluster, "live", f"live-{i:03d}", 1) for i in range(args.live_jobs)], batch_size=5_000
    )
    start = datetime.now(UTC) - timedelta(days=100 + args.days)
    per_job = args.old_events // 4 // args.old_jobs
    incidents, events = incident_rows(
        {job.pk: sorted(rng.uniform(0, args.days * 86_400) for _ in range(per_job)) for job in old},
        start,
        rng,
    )
    with connection.cursor() as outer:
        for table, columns, rows in (
            ("events_incident", INCIDENT_COLUMNS, incidents),
            ("events_jobevent", EVENT_COLUMNS, events),
        ):
            with outer.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        outer.execute("VACUUM ANALYZE")
    return {"incidents": len(incidents), "events": len(events)}


class Stream(threading.Thread):
    """``rate`` events a second through ``event_record_many``, on a fixed schedule, until stopped."""

    def __init__(self, rate: float) -> None:
        super().__init__(daemon=True)
        self.rate = rate
        self.halt = threading.Event()
        # (due, store latency ms, ms since the previous store committed)
        self.samples: list[tuple[float, float, float]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        from django.db import connection

        from apps.events.services import NewEvent, event_record_many
        from apps.jobs.models import TrainingJob

        try:
            jobs = list(TrainingJob.objects.filter(namespace="live"))
            began = previous = time.perf_counter()
            n = 0
            while not self.halt.is_set():
                due = began + n / self.rate
                wait = due - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                started = time.perf_counter()
                event = NewEvent(kind="pod.running", message="live", source="ingest", data={"n": n})
                event_record_many(job=jobs[n % len(jobs)], events=[event])
                done = time.perf_counter()
                self.samples.append((due, (done - started) * 1000, (done - previous) * 1000))
                previous = done
                n += 1
        except BaseException as exc:  # reported by the main thread
            self.error = exc
        finally:
            connection.close()


def _figures(samples: list[tuple[float, float, float]]) -> dict[str, float]:
    latency = [s[1] for s in samples]
    gaps = [s[2] for s in samples[1:]]
    return {
        "events": len(samples),
        "latency_p50_ms": round(percentile(latency, 50), 2),
        "latency_p99_ms": round(percentile(latency, 99), 2),
        "latency_max_ms": round(max(latency), 2),
        "gap_p99_ms": round(percentile(gaps, 99), 2),
        "gap_max_ms": round(max(gaps), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-events", type=int, default=1_000_000)
    parser.add_argument("--old-jobs", type=int, default=10_000)
    parser.add_argument("--days", type=int, default=30, help="the old history spans this many days")
    parser.add_argument("--live-jobs", type=int, default=20)
    parser.add_argument("--rate", type=float, default=20.0, help="live events a second")
    parser.add_argument("--baseline-s", type=float, default=10.0)
    parser.add_argument(
        "--batch-rows", type=int, default=0, help="RETENTION_BATCH_ROWS (default: the product's)"
    )
    args = parser.parse_args()
    url = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench_prune")
    create_database(url)
    redis, redis_url = start_redis()
    extra = {"RETENTION_BATCH_ROWS": str(args.batch_rows)} if args.batch_rows else {}
    env = product_env(url, REDIS_URL=redis_url, ALLOWED_HOSTS="127.0.0.1", **extra)
    os.environ.update(env)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from apps.events.models import Incident, JobEvent

    prune = None
    try:
        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        seeded = seed(args)
        print(f"seeded {seeded} stored 100+ days ago in {time.perf_counter() - started:.0f} s", flush=True)
        stream = Stream(args.rate)
        stream.start()
        time.sleep(args.baseline_s)  # the baseline: the stream alone (wall time is what is measured)
        prune_began = time.perf_counter()
        prune = spawn([sys.executable, "-c", PRUNE], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
        out, _ = prune.communicate()
        prune_ended = time.perf_counter()
        time.sleep(1.0)
        stream.halt.set()
        stream.join(30)
        if stream.error is not None:
            raise stream.error
        assert prune.returncode == 0, f"the prune failed ({prune.returncode})"
        report = json.loads(out.strip().splitlines()[-1])
        left = {"events": JobEvent.objects.count(), "incidents": Incident.objects.count()}
    finally:
        if prune is not None:
            stop(prune)
        stop(redis)
        connection.close()
        drop_database(url)
    baseline = _figures([s for s in stream.samples if s[0] < prune_began])
    during = _figures([s for s in stream.samples if prune_began <= s[0] <= prune_ended])
    deleted = report["report"]["events"]["deleted"]
    load = [round(x, 2) for x in os.getloadavg()]
    print(
        f"prune: {deleted} events and {report['report']['incidents']['deleted']} incidents deleted in "
        f"{report['seconds']:.1f} s ({report['report']['events']['batches']} batches of "
        f"{settings.RETENTION_BATCH_ROWS}); left: {left}"
    )
    for name, figures in (("baseline (stream alone)", baseline), ("during the prune", during)):
        print(
            f"  {name:<24} {figures['events']:6d} events at {args.rate:.0f}/s: store p50 "
            f"{figures['latency_p50_ms']} ms, p99 {figures['latency_p99_ms']} ms, "
            f"max {figures['latency_max_ms']} ms;"
            f" gap between commits p99 {figures['gap_p99_ms']} ms, max {figures['gap_max_ms']} ms"
        )
    stall = max(during["latency_max_ms"], during["gap_max_ms"])
    worst_baseline = max(baseline["latency_max_ms"], baseline["gap_max_ms"])
    print(
        f"  worst stall during the prune (longest store or gap between commits) {stall} ms "
        f"(goal <= {GOAL_MAX_STALL_MS:.0f} ms) = {stall / worst_baseline:.1f}x the baseline's worst "
        f"({worst_baseline} ms); load average {load}"
    )
    emit(
        {
            "bench": "prune",
            "old_events": seeded["events"],
            "events_deleted": deleted,
            "prune_s": round(report["seconds"], 1),
            "batch_rows": settings.RETENTION_BATCH_ROWS,
            "rate": args.rate,
            "baseline": baseline,
            "during": during,
            "loadavg": load,
            "goal_max_stall_ms": GOAL_MAX_STALL_MS,
            "stall_max_ms": stall,
            "goals_met": stall <= GOAL_MAX_STALL_MS,
        }
    )


if __name__ == "__main__":
    main()

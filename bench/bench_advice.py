"""Benchmark: strategy advice (issue #18) and the jobs list with its "could save" filter.

Run ``.venv/bin/python bench/bench_advice.py [--incidents 1000] [--jobs 10000] [--iterations 200]``
(PostgreSQL from ``BENCH_DATABASE_URL``, default ``postgres://postgres@127.0.0.1:5432/bench_advice``,
dropped and re-created). Measures, in-process with real PostgreSQL:

- ``GET /api/v1/jobs/{id}/advice/`` for a 64-pod job with ``--incidents`` incidents (UCE/HCCL on many
  ranks and levels, node faults, software faults, failed retries, measured durations) over every valid
  candidate: median and p99, goal p99 <= 200 ms; the first (cold: candidate validation not cached yet)
  call is reported apart. Baseline: one ``whatif.simulate`` call of one fault.
- ``GET /api/v1/jobs/?could_save_min=X`` (a page of 50) at ``--jobs`` jobs next to the plain list:
  the filter must keep the list within its goal (the plain list's own latency, +20 %).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import fresh_database, job_row, product_env, summary, timed_ms

GOAL_ADVICE_P99_MS = 200.0
LIST_SLOWDOWN_GOAL = 1.2


def seed(incidents: int, jobs: int) -> tuple[int, object]:
    from django.contrib.auth.models import User
    from django.utils import timezone

    from apps.advice.models import AdviceSummary
    from apps.events.models import Incident
    from apps.jobs.models import Cluster, TrainingJob
    from apps.policies.models import PolicyRevision, PolicySync
    from apps.policies.validation import validate_policy
    from tests.support.advice import incident_row

    rng = random.Random(18)
    cluster = Cluster.objects.create(name="bench")
    job = job_row(cluster, "llm", "pretrain", 63, mindcluster_version="26.1")
    job.save()
    spec = validate_policy({"strategies": ["retry", "recover", "dump"], "pod_rescheduling": True}).spec
    assert spec is not None
    revision = PolicyRevision.objects.create(job=job, number=1, spec=spec.to_dict())
    PolicySync.objects.create(job=job, revision=revision, generation=1, state="applied")
    job.current_revision = revision
    job.save()
    now = timezone.now()
    kinds = [
        ("uce", "", ("retry",), (("retry", "succeeded"),), "recovered"),
        ("uce", "", ("retry", "recover"), (("retry", "failed"), ("recover", "succeeded")), "recovered"),
        ("hccl", "", ("retry",), (("retry", "succeeded"),), "recovered"),
        ("normal", "RestartRequest", ("recover",), (("recover", "succeeded"),), "recovered"),
        ("normal", "", ("recover",), (("recover", "succeeded"),), "recovered"),
        ("node", "SeparateFault", ("dump", "pod-rescheduling"), (("dump", "saved"),), "rescheduled"),
    ]
    rows = []
    for number in range(1, incidents + 1):
        kind, level, strategies, attempts, outcome = rng.choice(kinds)
        opened = now - timedelta(minutes=rng.randint(1, 27 * 24 * 60))
        ranks = sorted(rng.sample(range(512), rng.choice((1, 1, 1, 2, 8))))
        rows.append(
            incident_row(
                job,
                number,
                opened,
                kind=kind,
                level=level,
                strategies=strategies,
                attempts=attempts,
                outcome=outcome,
                ranks=tuple(ranks),
                detect_ms=rng.randint(1000, 5000),
                decide_ms=rng.randint(0, 200),
                recover_ms=rng.randint(5000, 60000),
            )
        )
    Incident.objects.bulk_create(rows, batch_size=1000)
    fleet = [job_row(cluster, f"ns-{i % 50}", f"job-{i:05d}", 3) for i in range(jobs - 1)]
    TrainingJob.objects.bulk_create(fleet, batch_size=2000)
    priced = [
        AdviceSummary(job=j, could_save=rng.choice((0.0, 0.5, 3.0, 20.0, 120.0)), faults=3, computed_at=now)
        for j in TrainingJob.objects.exclude(pk=job.pk).only("pk")
        if rng.random() < 0.4
    ]
    AdviceSummary.objects.bulk_create(priced, batch_size=2000)
    user = User.objects.create_superuser("bench", password="bench")
    return job.pk, user


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--incidents", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--iterations", type=int, default=200)
    args = parser.parse_args()
    url = fresh_database("bench_advice")
    os.environ.update(product_env(url, ALLOWED_HOSTS="testserver,127.0.0.1,localhost"))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from rest_framework.test import APIClient

    from apps.decisions import whatif
    from apps.policies.validation import validate_policy

    job_id, user = seed(args.incidents, args.jobs)
    client = APIClient()
    client.force_authenticate(user)

    def advice() -> None:
        response = client.get(f"/api/v1/jobs/{job_id}/advice/")
        assert response.status_code == 200, response.content[:300]

    cold = timed_ms(advice, 1)[0]
    body = client.get(f"/api/v1/jobs/{job_id}/advice/").json()
    warm = summary(timed_ms(advice, args.iterations))
    spec = validate_policy({"strategies": ["retry", "recover", "dump"]}).spec
    scenario = whatif.parse_scenario({"faults": [{"type": "uce", "ranks": [9]}], "pods": 64})
    baseline = summary(timed_ms(lambda: whatif.simulate(spec, scenario), args.iterations))

    def page(query: str) -> None:
        response = client.get(f"/api/v1/jobs/?limit=50{query}")
        assert response.status_code == 200, response.content[:300]

    plain = summary(timed_ms(lambda: page(""), args.iterations))
    filtered = summary(timed_ms(lambda: page("&could_save_min=10"), args.iterations))
    total = client.get("/api/v1/jobs/?limit=1&could_save_min=10").json()["count"]

    print(
        f"advice, {args.incidents} incidents, {len(body['candidates'])} candidates "
        f"({sum(c['equivalent_policies'] for c in body['candidates'])} valid combinations), "
        f"{body['history']['fault_classes']} fault classes"
    )
    print(
        f"  cold first call {cold:.1f} ms; warm median {warm['median']:.1f} ms, p99 {warm['p99']:.1f} ms "
        f"(goal p99 <= {GOAL_ADVICE_P99_MS:.0f} ms)"
    )
    print(f"  baseline: one whatif.simulate of one fault, median {baseline['median']:.3f} ms")
    print(
        f"jobs list at {args.jobs} jobs, page of 50: plain median {plain['median']:.1f} ms "
        f"p99 {plain['p99']:.1f}; "
        f"could_save_min=10 ({total} jobs) median {filtered['median']:.1f} ms p99 {filtered['p99']:.1f}"
    )
    result = {
        "bench": "advice",
        "incidents": args.incidents,
        "candidates": len(body["candidates"]),
        "advice_cold_ms": round(cold, 1),
        "advice_median_ms": round(warm["median"], 1),
        "advice_p99_ms": round(warm["p99"], 1),
        "advice_goal_p99_ms": GOAL_ADVICE_P99_MS,
        "baseline_simulate_median_ms": round(baseline["median"], 3),
        "jobs": args.jobs,
        "list_median_ms": round(plain["median"], 1),
        "list_p99_ms": round(plain["p99"], 1),
        "list_filtered_median_ms": round(filtered["median"], 1),
        "list_filtered_p99_ms": round(filtered["p99"], 1),
        "goals_met": warm["p99"] <= GOAL_ADVICE_P99_MS
        and filtered["median"] <= plain["median"] * LIST_SLOWDOWN_GOAL,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()

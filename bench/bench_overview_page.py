"""The jobs overview page at fleet size (issue #26): first contentful paint, bytes, and how fast a job
change reaches an open overview. 100,000 jobs over 10 clusters, seeded by ``bench_overview.py``'s seed.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/bench_overview_page.py \
        [--jobs 100000] [--loads 20] [--changes 20] [--keep]

The product's own server (uvicorn, ``controlplane.asgi``, production settings, static files collected
and served by WhiteNoise as deployed) on the seeded database, a private Redis for the channel layer,
and Debian's Chromium (headless, through Playwright) logged in as a viewer of every cluster:

- ``--loads`` loads of ``/`` (the overview), each in a fresh browser context (cold cache: every byte
  of the first load is transferred), read from the browser's Performance API: first contentful paint
  (a ``paint`` entry), transferred bytes (the navigation and every resource; the websocket excluded),
  and the page's ``data-ready`` mark. Goals: FCP ≤ 1 s (p99), ≤ 300 KB.
- ``--changes`` job changes on an open overview, two to a job on the page: a fault reported, then
  its recovery, through ``apps.events.services.event_store`` (what the ingester calls for every
  observation: the job lock, the incident opened or closed, the broadcast after commit), and the time
  from the call to the row showing it (the Recovering badge appears, then goes) is taken in the page
  by a MutationObserver on the table. Goal: ≤ 1 s (p99). The baseline in the same run: the overview's
  own row read, ``GET /ui/jobs/<id>.json``, timed from the page (what every live update costs at least).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    REPO,
    emit,
    free_port,
    percentile,
    product_env,
    run_json,
    spawn,
    start_redis,
    stop,
    uvicorn_argv,
    wait_port,
)
from bench_api import bench_database_url, drop_database, recreate_database

FCP_GOAL_MS = 1_000.0
BYTES_GOAL = 300 * 1024
CHANGE_GOAL_MS = 1_000.0
PASSWORD = "bench-password-1"

MEASURE_JS = """
() => new Promise((resolve) => {
  const done = () => {
    const paint = performance.getEntriesByName("first-contentful-paint")[0];
    const nav = performance.getEntriesByType("navigation")[0];
    const resources = performance.getEntriesByType("resource");
    resolve({
      fcp_ms: paint ? paint.startTime : null,
      ttfb_ms: nav.responseStart,
      bytes: nav.transferSize + resources.reduce((sum, r) => sum + (r.transferSize || 0), 0),
      requests: resources.length + 1,
      rows: document.querySelectorAll("#jobs-table tbody tr").length,
      count: document.getElementById("job-count").textContent,
    });
  };
  const ready = () => document.body.dataset.ready === "true"
    && performance.getEntriesByName("first-contentful-paint").length > 0;
  if (ready()) return done();
  const timer = setInterval(() => { if (ready()) { clearInterval(timer); done(); } }, 20);
})
"""

# In the page: note when the row of ``job`` first shows (or stops showing) the Recovering badge.
WATCH_JS = """
([job, recovering]) => {
  window.__seen = null;
  const check = () => {
    const row = document.querySelector(`#jobs-table tr[data-job="${job}"]`);
    if (row && row.textContent.includes("Recovering") === recovering && window.__seen === null) {
      window.__seen = Date.now();
      window.__observer.disconnect();
    }
  };
  window.__observer = new MutationObserver(check);
  window.__observer.observe(document.querySelector("#jobs-table tbody"), { childList: true, subtree: true });
}
"""

ROW_READ_JS = """
async (job) => {
  const started = performance.now();
  const response = await fetch(`/ui/jobs/${job}.json`, { headers: { Accept: "application/json" } });
  await response.json();
  return performance.now() - started;
}
"""


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 1),
        "p99": round(percentile(values, 99), 1),
        "max": round(max(values), 1),
    }


def browser_step(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    """In a process configured for the bench database: the server, Chromium, the loads and changes."""
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from playwright.sync_api import sync_playwright

    from apps.events import broadcast, kinds
    from apps.events.services import event_store
    from apps.jobs.models import TrainingJob
    from tests.support.chromium import CHROMIUM, CHROMIUM_ARGS

    user = User.objects.get(username="bench")
    user.set_password(PASSWORD)
    user.save(update_fields=["password"])
    call_command("collectstatic", "--noinput", verbosity=0)
    port = free_port()
    server = spawn(uvicorn_argv(port, 1, "--no-access-log"), cwd=REPO, env=env)
    loads: list[dict[str, Any]] = []
    changes: list[float] = []
    row_reads: list[float] = []
    try:
        wait_port(port, 60)
        base = f"http://127.0.0.1:{port}"
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            login = browser.new_context()
            page = login.new_page()
            page.goto(f"{base}/login/")
            page.fill("#id_username", "bench")
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{base}/")
            state = login.storage_state()
            login.close()
            for i in range(args.loads + 1):  # the first load warms the server (imports, connections)
                context = browser.new_context(storage_state=state)
                page = context.new_page()
                page.goto(f"{base}/")
                measured = page.evaluate(MEASURE_JS)
                context.close()
                if i:
                    loads.append(measured)
                    print(json.dumps({"load": i, **measured}), flush=True)
            # Live: one page kept open, its jobs changed one at a time.
            context = browser.new_context(storage_state=state)
            page = context.new_page()
            page.goto(f"{base}/")
            page.wait_for_selector('#conn-state[data-state="live"]')
            ids = [
                int(x)
                for x in page.eval_on_selector_all("#jobs-table tbody tr", "rs => rs.map(r => r.dataset.job)")
            ]
            page.wait_for_timeout(500)  # the subscription frame reaches the server after "live"
            for i in range(args.changes):
                job = TrainingJob.objects.select_related("cluster").get(pk=ids[(i // 2) % len(ids)])
                # A job with no open incident gets a fault (the badge appears); one recovering gets its
                # recovery (the badge goes). Either way the row must change to show it.
                opening = not job.incidents.filter(closed_at__isnull=True).exists()
                page.evaluate(WATCH_JS, [job.pk, opening])
                started = time.time() * 1000
                if opening:
                    event_store(
                        job=job,
                        kind=kinds.FAULT_DETECTED,
                        message="bench fault",
                        source="ingest",
                        # A code of its own: the same fault reported again is folded into its incident.
                        data={"code": secrets.token_hex(4).upper(), "fault_type": "uce", "ranks": [i % 8]},
                    )
                else:
                    event_store(
                        job=job,
                        kind=kinds.RECOVERY_SUCCEEDED,
                        message="bench recovery",
                        source="ingest",
                        data={"strategy": "retry"},
                    )
                broadcast.flush(5)
                page.wait_for_function("() => window.__seen !== null", timeout=10_000)
                changes.append(page.evaluate("() => window.__seen") - started)
                row_reads.append(page.evaluate(ROW_READ_JS, job.pk))
                print(
                    json.dumps({"change": i, "job": job.pk, "opening": opening, "ms": round(changes[-1], 1)})
                )
            context.close()
            browser.close()
    finally:
        stop(server)
    return {
        "fcp_ms": _stats([x["fcp_ms"] for x in loads if x["fcp_ms"] is not None]),
        "fcp_missing": sum(1 for x in loads if x["fcp_ms"] is None),
        "ttfb_ms": _stats([x["ttfb_ms"] for x in loads]),
        "bytes": {
            "median": int(percentile([float(x["bytes"]) for x in loads], 50)),
            "max": max(x["bytes"] for x in loads),
        },
        "requests": loads[-1]["requests"],
        "rows": loads[-1]["rows"],
        "count_text": loads[-1]["count"],
        "change_ms": _stats(changes),
        "row_read_ms": _stats(row_reads),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--loads", type=int, default=20)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--database", default="bench_overview")
    parser.add_argument("--keep", action="store_true", help="keep the seeded database and reuse it next time")
    parser.add_argument("--step", choices=["browser"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step == "browser":
        print(json.dumps(browser_step(args, dict(os.environ))))
        return
    base_url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    redis, redis_url = start_redis()
    static = tempfile.mkdtemp(prefix="bench-overview-var-")
    env = product_env(
        bench_database_url(base_url, args.database),
        DEBUG="false",
        API_THROTTLE_RATE="100000000/min",
        REDIS_URL=redis_url,
        ALLOWED_HOSTS="127.0.0.1,localhost",
        VAR_DIR=static,
        DB_POOL="false",
        # Playwright's sync API runs an event loop in the browser step; its ORM calls are plain and serial.
        DJANGO_ALLOW_ASYNC_UNSAFE="true",
    )
    kept = Path(tempfile.gettempdir()) / f"{args.database}.seed.json"
    try:
        started = time.perf_counter()
        if not (args.keep and kept.exists()):
            recreate_database(base_url, args.database)
            migrate = [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"]
            subprocess.run(migrate, cwd=REPO, env=env, check=True)
            step = ["--step", "seed", "--jobs", str(args.jobs), "--clusters", str(args.clusters)]
            seeded = run_json(
                [sys.executable, str(Path(__file__).with_name("bench_overview.py")), *step], env
            )
            kept.write_text(json.dumps(seeded))
        print(
            f"seeded {args.jobs} jobs over {args.clusters} clusters in {time.perf_counter() - started:.1f}s"
        )
        step = ["--step", "browser", "--loads", str(args.loads), "--changes", str(args.changes)]
        out = subprocess.run(
            [sys.executable, __file__, *step],
            cwd=REPO,
            env=env,
            check=True,
            text=True,
            stdout=subprocess.PIPE,
        ).stdout  # its stderr shows, as the browser step's progress does not
        result = json.loads(out.strip().splitlines()[-1])
    finally:
        stop(redis)
        if not args.keep:
            kept.unlink(missing_ok=True)
            drop_database(base_url, args.database)
    load = [round(x, 2) for x in os.getloadavg()]
    fcp, change, read = result["fcp_ms"], result["change_ms"], result["row_read_ms"]
    print(
        f"overview of {args.jobs} jobs ({result['count_text']!r}, {result['rows']} rows): first contentful "
        f"paint p50 {fcp['p50']} ms, p99 {fcp['p99']} ms over {fcp['n']} cold loads "
        f"(goal <= {FCP_GOAL_MS:.0f}; the HTML's first byte p50 {result['ttfb_ms']['p50']} ms); "
        f"{result['bytes']['max'] / 1024:.0f} KB in {result['requests']} requests (goal <= 300 KB)"
    )
    print(
        f"job change → row updated: p50 {change['p50']} ms, p99 {change['p99']} ms, "
        f"max {change['max']} ms over "
        f"{change['n']} changes (goal <= {CHANGE_GOAL_MS:.0f}); baseline, the row's own read from the page: "
        f"p50 {read['p50']} ms ({change['p50'] / read['p50']:.1f}x); load average {load}"
    )
    emit(
        {
            "bench": "overview_page",
            "jobs": args.jobs,
            **result,
            "loadavg": load,
            "goals": {
                "fcp_p99_ms<=1000": fcp["p99"] <= FCP_GOAL_MS and result["fcp_missing"] == 0,
                "bytes<=300KB": result["bytes"]["max"] <= BYTES_GOAL,
                "change_p99_ms<=1000": change["p99"] <= CHANGE_GOAL_MS,
            },
        }
    )


if __name__ == "__main__":
    main()

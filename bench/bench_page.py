"""How fast does a job page with 10,000 stored events open, and how heavy is it?

Creates a throw-away database with one job and N events (default 10,000), serves the real ASGI app
with Daphne, and loads ``/jobs/<id>/#live`` in headless Chromium ``--loads`` times, each in a fresh
browser context (cold cache, so every byte of the initial load is transferred). Per load it reads,
from the browser's own Performance API (navigation start = 0):

- ``fcp_ms``: first contentful paint;
- ``ready_ms``: the page's ``data-ready`` mark (form shown, newest page of events rendered);
- ``bytes``: transferred bytes of the document and every sub-resource (the websocket excluded).

Goals (issue #7): first content ≤ 500 ms, initial page ≤ 300 KB. Prints one line per load and a final
JSON line ``{"bench": "page", ...}``. Needs PostgreSQL or SQLite via DATABASE_URL, Redis for the
channel layer (TEST_REDIS_URL), the ``playwright`` package and Chromium (``--chromium``).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/bench_page.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.test")
# Playwright's sync API runs an event loop in this thread; the ORM calls here are plain and serial.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
# The server is a fork of this process: a connection pool would be shared with it across the fork.
os.environ["DB_POOL"] = "false"

from tests.support.chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: E402  (after the path above)

PASSWORD = "bench-password-1"
FCP_GOAL_MS = 500
WEIGHT_GOAL_BYTES = 300 * 1024

MEASURE_JS = """
() => new Promise((resolve) => {
  const done = () => {
    const paint = performance.getEntriesByName("first-contentful-paint")[0];
    const ready = performance.getEntriesByName("data-ready")[0];
    const nav = performance.getEntriesByType("navigation")[0];
    const resources = performance.getEntriesByType("resource");
    const bytes = nav.transferSize + resources.reduce((sum, r) => sum + (r.transferSize || 0), 0);
    resolve({
      ttfb_ms: nav.responseStart,
      fcp_ms: paint ? paint.startTime : null,
      ready_ms: ready ? ready.startTime : null,
      bytes,
      requests: resources.length + 1,
      events_shown: document.querySelectorAll("#event-list li").length,
    });
  };
  if (document.body.dataset.ready === "true") done();
  else new MutationObserver((_, obs) => {
    if (document.body.dataset.ready === "true") { obs.disconnect(); done(); }
  }).observe(document.body, { attributes: true });
})
"""


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (p99 of 20 loads is the slowest load, as it should be)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 1),
        "p99": round(percentile(values, 99), 1),
        "max": round(max(values), 1),
    }


def seed(events: int) -> tuple[int, str]:
    """One superuser, one cluster, one job with ``events`` stored events; returns (job id, username)."""
    from django.contrib.auth.models import User
    from django.utils import timezone

    from apps.events.models import JobEvent
    from apps.jobs.models import Cluster, TrainingJob

    user = User.objects.create_superuser("bench", "bench@example.com", PASSWORD)
    cluster = Cluster.objects.create(name="bench", kubeconfig_path="/nonexistent/kubeconfig")
    job = TrainingJob.objects.create(
        cluster=cluster,
        namespace="llm",
        name="llama-bench",
        framework="pytorch",
        replicas={"Master": 1, "Worker": 15},
        npus_per_pod=8,
    )
    start = timezone.now() - timedelta(hours=10)
    kinds = ["fault.detected", "strategy.chosen", "recovery.succeeded", "job.phase_changed"]
    JobEvent.objects.bulk_create(
        (
            JobEvent(
                job=job,
                seq=i,
                kind=kinds[i % len(kinds)],
                severity="error" if i % 4 == 0 else "info",
                message=f"event {i}: rank {i % 128} on node-{i % 16}",
                source="bench",
                data={"ranks": [i % 128], "node": f"node-{i % 16}"},
                occurred_at=start + timedelta(seconds=i * 3),
            )
            for i in range(1, events + 1)
        ),
        batch_size=2000,
    )
    return job.pk, user.get_username()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--loads", type=int, default=25, help="page loads to measure (at least 20)")
    parser.add_argument("--chromium", default=CHROMIUM)
    args = parser.parse_args(argv)
    if args.loads < 20:
        parser.error("--loads must be at least 20 for a meaningful p99")

    import django

    django.setup()
    from channels.testing.live import make_application
    from daphne.testing import DaphneProcess
    from django.conf import settings
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
    from django.db import connection
    from playwright.sync_api import sync_playwright

    # A database of our own: never touch the one DATABASE_URL names.
    test_name = f"bench_page_{uuid.uuid4().hex[:8]}"
    if connection.vendor == "sqlite":
        test_name = str(Path(settings.VAR_DIR) / f"{test_name}.sqlite3")
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = test_name
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    server = None
    try:
        started = time.monotonic()
        job_id, username = seed(args.events)
        print(f"seeded {args.events} events in {time.monotonic() - started:.1f}s", flush=True)
        connection.close()  # the forked server opens its own
        server = DaphneProcess(
            "127.0.0.1", partial(make_application, static_wrapper=ASGIStaticFilesHandler), setup=None
        )
        server.start()
        if not server.ready.wait(15):
            raise RuntimeError("the server did not start")
        base = f"http://127.0.0.1:{server.port.value}"
        results: list[dict[str, Any]] = []
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
            login = browser.new_context()
            page = login.new_page()
            page.goto(f"{base}/login/")
            page.fill("#id_username", username)
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{base}/")
            state = login.storage_state()
            login.close()
            url = f"{base}/jobs/{job_id}/#live"
            for i in range(args.loads + 1):  # the first load warms the server (imports, connections)
                context = browser.new_context(storage_state=state)  # fresh cache every time
                page = context.new_page()
                page.goto(url)
                measured = page.evaluate(MEASURE_JS)
                context.close()
                if i == 0:
                    continue
                results.append(measured)
                print(json.dumps({"load": i, **measured}), flush=True)
            browser.close()
    finally:
        if server is not None:
            server.terminate()
            server.join()
        connection.creation.destroy_test_db(old_name, verbosity=0)

    fcp = [r["fcp_ms"] for r in results if r["fcp_ms"] is not None]
    ready = [r["ready_ms"] for r in results if r["ready_ms"] is not None]
    weight = [float(r["bytes"]) for r in results]
    report = {
        "bench": "page",
        "events": args.events,
        "loads": len(results),
        "events_rendered": results[-1]["events_shown"] if results else 0,
        "fcp_ms": summary(fcp),
        "ready_ms": summary(ready),
        "ttfb_ms": summary([r["ttfb_ms"] for r in results]),
        "bytes": {"median": int(statistics.median(weight)), "max": int(max(weight))},
        "requests": results[-1]["requests"] if results else 0,
        "goal": {"fcp_ms": FCP_GOAL_MS, "bytes": WEIGHT_GOAL_BYTES},
    }
    report["ok"] = bool(
        fcp
        and percentile(fcp, 99) <= FCP_GOAL_MS
        and max(weight) <= WEIGHT_GOAL_BYTES
        and len(fcp) == len(results)
    )
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

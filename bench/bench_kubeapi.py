"""Benchmark the Kubernetes API emulator through the official client.

Runs the emulator (and, for comparison, a bare aiohttp server answering a fixed JSON body) in
separate processes so the load generator does not share their GIL, loads N AscendJobs x P pods,
opens W watchers on AscendJobs that consume every event, then drives merge-patches from T threads.

    .venv/bin/python bench/bench_kubeapi.py [--jobs 1000 --pods 16 --watchers 10 --writes 5000]

The last line is a JSON summary: {"bench": "kubeapi", ...}.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import urllib3
from _common import spawn, stop
from kubernetes import client, watch

ROOT = Path(__file__).resolve().parents[1]
GROUP, VERSION, PLURAL, NS = "mindxdl.gitee.com", "v1", "ascendjobs", "bench"

EMULATOR_CODE = """
import asyncio, sys
sys.path.insert(0, {root!r})
from simcluster.kubeapi import serve
asyncio.run(serve("127.0.0.1", {port}, history_limit={history}))
"""

BASELINE_CODE = """
from aiohttp import web
BODY = (b'{{"apiVersion":"mindxdl.gitee.com/v1","kind":"AscendJob",'
        b'"metadata":{{"name":"x","resourceVersion":"1"}}}}')
async def handle(request):
    await request.read()
    return web.Response(body=BODY, content_type="application/json")
app = web.Application()
app.router.add_route("*", "/{{tail:.*}}", handle)
web.run_app(app, host="127.0.0.1", port={port}, access_log=None, print=None)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(code: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = spawn([sys.executable, "-c", code.format(root=str(ROOT), port=port, history=10_000)])
    url = f"http://127.0.0.1:{port}"
    http = urllib3.PoolManager()
    for _ in range(200):
        try:
            http.request("GET", f"{url}/healthz", retries=False, timeout=0.5)
            return proc, url
        except urllib3.exceptions.HTTPError:
            time.sleep(0.05)
    stop(proc, grace=0)
    raise RuntimeError("server did not start")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def make_client(url: str, pool: int = 32) -> client.ApiClient:
    cfg = client.Configuration(host=url)
    cfg.connection_pool_maxsize = pool
    return client.ApiClient(cfg)


def job(i: int) -> dict:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AscendJob",
        "metadata": {"name": f"job-{i:05d}", "labels": {"framework": "pytorch", "bench": "1"}},
        "spec": {
            "replicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 15}},
            "runPolicy": {"schedulingPolicy": {"minAvailable": 16, "queue": "default"}},
        },
    }


def pod(job_i: int, p: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"job-{job_i:05d}-{p:02d}",
            "labels": {"job-name": f"job-{job_i:05d}", "framework": "pytorch"},
        },
        "spec": {
            "containers": [
                {
                    "name": "ascend",
                    "image": "mindspore:latest",
                    "resources": {"limits": {"huawei.com/Ascend910": "8"}},
                }
            ],
            "schedulerName": "volcano",
            "nodeName": f"node-{p:03d}",
        },
    }


def load(url: str, jobs: int, pods: int) -> float:
    api = make_client(url, 64)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": NS}})
    t0 = time.perf_counter()
    with ThreadPoolExecutor(16) as ex:
        list(
            ex.map(
                lambda i: custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, job(i)),
                range(jobs),
            )
        )
        list(
            ex.map(
                lambda ip: core.create_namespaced_pod(NS, pod(*ip)),
                [(i, p) for i in range(jobs) for p in range(pods)],
            )
        )
    api.close()
    return time.perf_counter() - t0


def start_watchers(url: str, count: int, rv: str | None) -> tuple[list[int], list[threading.Thread], list]:
    seen = [0] * count
    watches: list[watch.Watch] = []
    threads = []
    for k in range(count):
        w = watch.Watch()
        watches.append(w)

        def run(k: int = k, w: watch.Watch = w) -> None:
            api = make_client(url, 2)
            custom = client.CustomObjectsApi(api)
            kwargs = {"resource_version": rv} if rv else {}
            try:
                for ev in w.stream(
                    custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL, **kwargs
                ):
                    if ev["type"] == "MODIFIED":
                        seen[k] += 1
            except Exception:  # the server is terminated at the end of the run
                return

        t = threading.Thread(target=run, daemon=True)
        t.start()
        threads.append(t)
    time.sleep(0.5)
    return seen, threads, watches


def write_loop(url: str, jobs: int, writes: int, threads: int) -> tuple[float, list[float]]:
    api = make_client(url, threads * 2)
    custom = client.CustomObjectsApi(api)
    latencies: list[float] = []
    lock = threading.Lock()

    def worker(t: int) -> None:
        local = []
        for n in range(t, writes, threads):
            body = {"metadata": {"annotations": {"bench/seq": str(n)}}}
            t0 = time.perf_counter()
            custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, f"job-{n % jobs:05d}", body)
            local.append(time.perf_counter() - t0)
        with lock:
            latencies.extend(local)

    t0 = time.perf_counter()
    ths = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    elapsed = time.perf_counter() - t0
    api.close()
    return elapsed, latencies


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] * 1000 if len(values) > 1 else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=16)
    ap.add_argument("--watchers", type=int, default=10)
    ap.add_argument("--writes", type=int, default=5000)
    ap.add_argument("--threads", type=int, default=4)
    args = ap.parse_args()

    proc, url = start(EMULATOR_CODE)
    try:
        load_s = load(url, args.jobs, args.pods)
        print(f"loaded {args.jobs} jobs x {args.pods} pods in {load_s:.1f}s", flush=True)
        api = make_client(url)
        rv = client.CustomObjectsApi(api).list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, limit=1)[
            "metadata"
        ]["resourceVersion"]
        seen, _threads, _watches = start_watchers(url, args.watchers, rv)
        elapsed, lat = write_loop(url, args.jobs, args.writes, args.threads)
        deadline = time.time() + 30
        while time.time() < deadline and min(seen, default=args.writes) < args.writes:
            time.sleep(0.1)
        rss = rss_mib(proc.pid)
        delivered = min(seen, default=0)
    finally:
        stop(proc)

    base_proc, base_url = start(BASELINE_CODE)
    try:
        base_elapsed, base_lat = write_loop(base_url, args.jobs, args.writes, args.threads)
    finally:
        stop(base_proc)

    wps, base_wps = args.writes / elapsed, args.writes / base_elapsed
    summary = {
        "bench": "kubeapi",
        "jobs": args.jobs,
        "pods": args.pods,
        "watchers": args.watchers,
        "writes": args.writes,
        "threads": args.threads,
        "load_s": round(load_s, 2),
        "writes_per_s": round(wps, 1),
        "p50_ms": round(pct(lat, 50), 2),
        "p99_ms": round(pct(lat, 99), 2),
        "server_rss_mib": round(rss, 1),
        "events_delivered_min_per_watcher": delivered,
        "baseline_writes_per_s": round(base_wps, 1),
        "baseline_p50_ms": round(pct(base_lat, 50), 2),
        "baseline_p99_ms": round(pct(base_lat, 99), 2),
        "throughput_ratio": round(wps / base_wps, 3),
        "p99_ratio": round(pct(lat, 99) / max(pct(base_lat, 99), 1e-9), 3),
        "targets_met": wps >= 500 and pct(lat, 99) <= 20 and rss <= 1024 and delivered == args.writes,
    }
    print(
        f"emulator: {wps:.0f} writes/s  p50 {summary['p50_ms']} ms  p99 {summary['p99_ms']} ms  "
        f"RSS {rss:.0f} MiB  events/watcher {delivered}/{args.writes}"
    )
    print(
        f"baseline: {base_wps:.0f} writes/s  p50 {summary['baseline_p50_ms']} ms  "
        f"p99 {summary['baseline_p99_ms']} ms"
    )
    print(f"ratio: throughput {summary['throughput_ratio']}  p99 {summary['p99_ratio']}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

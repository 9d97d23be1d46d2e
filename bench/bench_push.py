"""Push-pipeline benchmark (issue #4).

1. N policy saves at R per second → save-to-patched latency (save call → sync row ``applied``, i.e.
   the AscendJob, PodGroup and ConfigMap all written), p50 and p99. Goals: ≤ 300 ms and ≤ 2 s.
2. A drift-check (reconcile) sweep over M jobs. Goal: ≤ 60 s for 10,000 jobs.
Both against the API emulator in its own process, a real Redis broker and a real Celery worker,
with PostgreSQL. Baseline, measured in the same run: a bare ``kubernetes``-client loop against the
same emulator (one merge-patch per save; two GETs per job for the sweep).

    .venv/bin/python bench/bench_push.py [--saves 1000 --rate 5 --jobs 10000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _common import (
    REPO,
    emit,
    free_port,
    fresh_database,
    give_applied_policy,
    product_env,
    spawn,
    start_celery_worker,
    start_redis,
    stop_all,
    summary,
    wait_port,
)

SPECS = [
    {"strategies": ["retry", "recover", "dump"], "pod_rescheduling": True},
    {"strategies": ["recover"], "fault_retry_times": 3},
]


def job_manifest(namespace: str, name: str) -> dict[str, Any]:
    container = {
        "name": "ascend",
        "image": "mindspeed-llm:2.3.0",
        "ports": [{"containerPort": 2222, "name": "ascendjob-port"}],
        "resources": {"requests": {"huawei.com/Ascend910": 8}, "limits": {"huawei.com/Ascend910": 8}},
    }
    return {
        "apiVersion": "mindxdl.gitee.com/v1",
        "kind": "AscendJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {"framework": "pytorch"}},
        "spec": {
            "schedulerName": "volcano",
            "replicaSpecs": {
                role: {
                    "replicas": count,
                    "restartPolicy": "Never",
                    "template": {"spec": {"containers": [container]}},
                }
                for role, count in (("Master", 1), ("Worker", 3))
            },
        },
    }


def write_kubeconfig(path: Path, port: int) -> None:
    # The emulator authenticates since RBAC landed (issue #23): its static admin token, as in the
    # kubeconfigs it writes itself (simcluster/kubeapi/authn.py).
    from simcluster.kubeapi import ADMIN_TOKEN

    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: bench\n"
        f"clusters: [{{name: bench, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        f"users: [{{name: bench, user: {{token: {ADMIN_TOKEN}}}}}]\n"
        "contexts: [{name: bench, context: {cluster: bench, user: bench}}]\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--saves", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=5.0)
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs in the reconcile sweep")
    parser.add_argument("--save-jobs", type=int, default=50)
    args = parser.parse_args()

    database_url = fresh_database("bench_push")
    redis_proc, redis_url = start_redis()
    api_port = free_port()
    var = REPO / "var" / "bench"
    var.mkdir(parents=True, exist_ok=True)
    kubeconfig = var / f"push-{api_port}.kubeconfig"
    write_kubeconfig(kubeconfig, api_port)
    env = product_env(database_url, REDIS_URL=redis_url)
    os.environ.update(env)
    procs: list[subprocess.Popen[bytes]] = [redis_proc]
    try:
        procs.append(
            spawn(
                [
                    sys.executable,
                    "-c",
                    "import asyncio; from simcluster.kubeapi import serve; "
                    f"asyncio.run(serve('127.0.0.1', {api_port}))",
                ],
                cwd=REPO,
                env=env,
            )
        )
        wait_port(api_port)
        import django

        sys.path.insert(0, str(REPO))
        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        procs.append(start_celery_worker(env))
        results = run(args, kubeconfig)
    finally:
        stop_all()
    emit({"bench": "push", **results})


def run(args: argparse.Namespace, kubeconfig: Path) -> dict[str, Any]:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    from apps.audit.actors import Actor
    from apps.jobs.models import Cluster, TrainingJob
    from apps.policies.models import PolicySync
    from apps.policies.services import policy_revision_create

    api = k8s_config.new_client_from_config(config_file=str(kubeconfig))
    custom = k8s.CustomObjectsApi(api)
    core = k8s.CoreV1Api(api)
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    cluster = Cluster.objects.create(name=namespace, kubeconfig_path=str(kubeconfig))

    def create(name: str) -> dict[str, Any]:
        job = custom.create_namespaced_custom_object(
            "mindxdl.gitee.com", "v1", namespace, "ascendjobs", job_manifest(namespace, name)
        )
        meta = job["metadata"]
        custom.create_namespaced_custom_object(
            "scheduling.volcano.sh",
            "v1beta1",
            namespace,
            "podgroups",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {
                    "name": f"{name}-{meta['uid']}",
                    "namespace": namespace,
                    "labels": meta.get("labels", {}),
                },
                "spec": {"minMember": 4},
            },
        )
        return job

    save_jobs = []
    for i in range(args.save_jobs):
        live = create(f"save-{i}")
        save_jobs.append(
            TrainingJob.objects.create(
                cluster=cluster,
                namespace=namespace,
                name=f"save-{i}",
                uid=live["metadata"]["uid"],
                replicas={"Master": 1, "Worker": 3},
                npus_per_pod=8,
            )
        )

    # Warm the worker (imports, connections) so the first saves do not measure start-up.
    warm = policy_revision_create(job=save_jobs[0], spec=SPECS[1], actor=Actor(name="bench"))
    wait_applied([PolicySync.objects.get(revision=warm).pk], 60)

    print(f"saving {args.saves} policies at {args.rate}/s ...", flush=True)
    started: dict[int, float] = {}
    interval = 1.0 / args.rate
    t_next = time.time()
    for i in range(args.saves):
        job = save_jobs[i % len(save_jobs)]
        t0 = time.time()
        revision = policy_revision_create(job=job, spec=SPECS[i % 2], actor=Actor(name="bench"))
        started[PolicySync.objects.get(revision=revision).pk] = t0
        t_next += interval
        time.sleep(max(0.0, t_next - time.time()))
    wait_applied(list(started), 120)
    latencies = []
    for sync in PolicySync.objects.filter(pk__in=list(started)):
        if sync.state == "applied" and sync.finished_at:
            latencies.append((sync.finished_at.timestamp() - started[sync.pk]) * 1000)
    failed = len(started) - len(latencies)

    # Baseline: a bare client merge-patch loop at the same rate of one patch per save (closed loop).
    baseline = []
    for i in range(min(args.saves, 300)):
        job = save_jobs[i % len(save_jobs)]
        t0 = time.perf_counter()
        custom.patch_namespaced_custom_object(
            "mindxdl.gitee.com",
            "v1",
            namespace,
            "ascendjobs",
            job.name,
            {"metadata": {"annotations": {"bench": str(i)}}},
            _content_type="application/merge-patch+json",
        )
        baseline.append((time.perf_counter() - t0) * 1000)

    sweep = reconcile_bench(args, create_fn=create, cluster=cluster, namespace=namespace, custom=custom)
    save_summary = summary(latencies)
    base_summary = summary(baseline)
    return {
        "saves": args.saves,
        "rate_per_s": args.rate,
        "failed": failed,
        "save_to_patched_ms": save_summary,
        "baseline_patch_ms": base_summary,
        "ratio_median": save_summary["median"] / base_summary["median"],
        "ratio_p99": save_summary["p99"] / base_summary["p99"],
        "goal_p50_ms": 300,
        "goal_p99_ms": 2000,
        **sweep,
    }


def wait_applied(ids: list[int], timeout: float) -> None:
    from apps.policies.models import PolicySync

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = PolicySync.objects.filter(pk__in=ids).exclude(state__in=["applied", "failed", "superseded"])
        if not pending.exists():
            return
        time.sleep(0.2)


def reconcile_bench(
    args: argparse.Namespace, *, create_fn: Any, cluster: Any, namespace: str, custom: Any
) -> dict[str, Any]:
    from apps.jobs.models import TrainingJob
    from apps.policies.reconcile import reconcile_all
    from apps.policies.validation import validate_policy

    print(f"creating {args.jobs} jobs for the sweep ...", flush=True)
    spec = validate_policy({}).spec
    assert spec is not None
    names = [f"sweep-{i}" for i in range(args.jobs)]
    with ThreadPoolExecutor(8) as pool:
        lives = list(pool.map(create_fn, names))
    jobs = TrainingJob.objects.bulk_create(
        [
            TrainingJob(
                cluster=cluster,
                namespace=namespace,
                name=n,
                uid=live["metadata"]["uid"],
                replicas={"Master": 1, "Worker": 3},
                npus_per_pod=8,
            )
            for n, live in zip(names, lives, strict=True)
        ]
    )
    give_applied_policy(jobs, spec.to_dict(), batch_size=1000)
    print("sweeping ...", flush=True)
    t0 = time.perf_counter()
    checked = reconcile_all()
    sweep_s = time.perf_counter() - t0

    def bare(pair: tuple[str, str]) -> None:
        name, uid = pair
        custom.get_namespaced_custom_object("mindxdl.gitee.com", "v1", namespace, "ascendjobs", name)
        custom.get_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", namespace, "podgroups", f"{name}-{uid}"
        )

    t0 = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(bare, [(n, live["metadata"]["uid"]) for n, live in zip(names, lives, strict=True)]))
    bare_s = time.perf_counter() - t0
    return {
        "sweep_jobs": checked,
        "sweep_s": round(sweep_s, 2),
        "baseline_sweep_s": round(bare_s, 2),
        "sweep_ratio": round(sweep_s / bare_s, 2),
        "goal_sweep_s": 60,
    }


if __name__ == "__main__":
    main()

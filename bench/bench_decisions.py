"""Platform-mode decision latency (issue #8), in the real handshake order (issue #13).

50 jobs in platform mode fault at once in the simulated cluster. The simulated ClusterD follows the
real one (``component/clusterd/pkg/application/recover/fault_recover_platform_plugin.go``): it first
needs a standing answer in ``ProcessRecoverStrategy`` (the job was rendered with one), then writes
``ProcessConfirmFault`` and waits for the key ``ProcessResultFault``, re-reading the strategy once it
exists. For each job: the time from ``ProcessConfirmFault`` appearing to ``ProcessResultFault``
appearing (written in one patch with the final strategy and ``RankTableReady``), both seen by an
independent watch on the PodGroups. Goal: p99 ≤ 1 s (ClusterD itself polls every 3 s). Also counted:
faults that found no standing answer, and ClusterD's 508/509 give-ups.
The path measured is the production one: ``manage.py decide`` (PodGroup watch) → decision service →
inline write (the Celery task is the retry path; a real worker runs) → PodGroup patch.

    .venv/bin/python bench/bench_decisions.py [--jobs 50]
"""

from __future__ import annotations

import argparse
import copy
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import _common
from _common import REPO, emit, fresh_database, product_env, start_celery_worker, start_redis, summary

POLICY = {
    "strategies": ["retry", "recover", "dump"],
    "platform_mode": True,
    "decision_rules": [{"match": {"fault_type": ["uce"]}, "strategy": "retry"}],
    # The standing answer: retry, so a UCE fault stays on ClusterD's retry path until the rule answers
    # (controller.go:364-370; validation warns with another standing answer and a retry rule).
    "default_strategy": "retry",
    "decision_timeout_s": 60,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--processes", type=int, default=2, help="decide processes")
    args = parser.parse_args()
    database_url = fresh_database("bench_decisions")
    redis_proc, redis_url = start_redis()
    env = product_env(database_url, REDIS_URL=redis_url)
    os.environ.update(env)
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from _common import free_port, wait_port

    api_port, grpc_port = free_port(), free_port()
    kubeconfig = REPO / "var" / "bench" / f"decisions-{api_port}.kubeconfig"
    kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    kubeconfig.unlink(missing_ok=True)  # a stale one would name a stale fault endpoint
    procs: list[subprocess.Popen[bytes]] = [redis_proc]
    # The simulated cluster runs in its own process, as in production: the bench process only observes.
    procs.append(
        _common.spawn(
            [
                sys.executable,
                "manage.py",
                "simcluster",
                "--settings",
                "controlplane.settings.dev",
                "--port",
                str(api_port),
                "--grpc-port",
                str(grpc_port),
                "--kubeconfig",
                str(kubeconfig),
            ],
            cwd=REPO,
            env=env,
        )
    )
    try:
        wait_port(api_port, 60)
        # The control endpoint has a port of its own, recorded in the kubeconfig once it listens
        # (simcluster's _record_fault_endpoint; sim_fault reads it the same way).
        sim = SimProcess(str(kubeconfig), wait_control_url(kubeconfig, procs[-1]))
        procs.append(start_celery_worker(env))
        result = run(args, sim, env, procs)
    finally:
        _common.stop_all()
    emit({"bench": "decisions", **result})


def wait_control_url(kubeconfig: Path, sim: subprocess.Popen[bytes], seconds: float = 60) -> str:
    """The fault endpoint the simulated cluster recorded in its kubeconfig, once it is there and listening."""
    from urllib.parse import urlsplit

    import yaml
    from _common import wait_port

    from simcluster.endpoints import FAULT_ENDPOINT_EXTENSION

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if sim.poll() is not None:
            raise RuntimeError(f"the simulated cluster exited with {sim.returncode} before it was ready")
        try:
            clusters = (yaml.safe_load(kubeconfig.read_text()) or {}).get("clusters") or []
        except (OSError, yaml.YAMLError):
            clusters = []
        for entry in clusters:
            for extension in (entry.get("cluster") or {}).get("extensions") or []:
                url = (extension.get("extension") or {}).get("url")
                if extension.get("name") == FAULT_ENDPOINT_EXTENSION and url:
                    wait_port(int(urlsplit(url).port or 0), 10)
                    return str(url)
        time.sleep(0.1)
    raise RuntimeError(f"no fault endpoint recorded in {kubeconfig} within {seconds:.0f} s")


class SimProcess:
    """The simulated cluster in another process: its kubeconfig and fault-injection endpoint."""

    def __init__(self, kubeconfig_path: str, control_url: str) -> None:
        self.kubeconfig_path = kubeconfig_path
        self.control_url = control_url

    def inject_fault(self, namespace: str, job: str, *, rank: int, fault_type: str, recovers: bool) -> None:
        import json
        import urllib.request

        body = json.dumps(
            {"namespace": namespace, "job": job, "rank": rank, "type": fault_type, "recovers": recovers}
        ).encode()
        request = urllib.request.Request(
            f"{self.control_url}/faults", data=body, headers={"Content-Type": "application/json"}
        )
        urllib.request.urlopen(request, timeout=10).read()


def run(args: argparse.Namespace, sim: Any, env: dict[str, str], procs: list[Any]) -> dict[str, Any]:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config
    from kubernetes import watch as k8s_watch

    from apps.audit.actors import Actor
    from apps.jobs.models import Cluster
    from apps.policies.rendering import render
    from apps.policies.services import policy_revision_create
    from apps.policies.validation import validate_policy
    from mindcluster import keys as c

    api = k8s_config.new_client_from_config(config_file=sim.kubeconfig_path)
    custom = k8s.CustomObjectsApi(api)
    cluster = Cluster.objects.create(
        name=f"bench-{uuid.uuid4().hex[:6]}", kubeconfig_path=sim.kubeconfig_path
    )
    spec = validate_policy(POLICY).spec
    assert spec is not None
    container = {
        "name": "ascend",
        "image": "mindspeed-llm:2.3.0",
        "resources": {"requests": {"huawei.com/Ascend910": 8}, "limits": {"huawei.com/Ascend910": 8}},
    }
    names = []
    podgroups: dict[str, str] = {}
    # plat-warmup is asked first, alone: its answer proves the decider is watching before the
    # measured questions come (a fixed wait measured the decider's start-up on a loaded machine).
    for i in [*range(args.jobs), -1]:
        name = f"plat-{i}" if i >= 0 else "plat-warmup"
        manifest = {
            "apiVersion": "mindxdl.gitee.com/v1",
            "kind": "AscendJob",
            "metadata": {"name": name, "namespace": "default", "labels": {"framework": "pytorch"}},
            "spec": {
                "schedulerName": "volcano",
                "replicaSpecs": {
                    role: {
                        "replicas": 1,
                        "restartPolicy": "Never",
                        "template": {"spec": {"containers": [copy.deepcopy(container)]}},
                    }
                    for role in ("Master", "Worker")
                },
            },
        }
        rendered = render(manifest, spec)
        live = custom.create_namespaced_custom_object(
            c.ASCENDJOB_GROUP, c.ASCENDJOB_VERSION, "default", c.ASCENDJOB_PLURAL, rendered.manifest
        )
        if rendered.configmap:
            k8s.CoreV1Api(api).create_namespaced_config_map("default", rendered.configmap)
        job = _common.job_row(cluster, "default", name, 1, uid=live["metadata"]["uid"])
        job.save()
        policy_revision_create(job=job, spec=POLICY, actor=Actor(name="bench"), push=False)
        names.append(name)
        podgroups[name] = f"{name}-{live['metadata']['uid']}"  # the operator names it <job>-<uid>
    warmup = names.pop()

    def podgroup_annotations(job: str) -> dict[str, str] | None:
        try:
            obj: dict[str, Any] = custom.get_namespaced_custom_object(
                c.PODGROUP_GROUP, c.PODGROUP_VERSION, "default", c.PODGROUP_PLURAL, podgroups[job]
            )
        except k8s.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return dict(obj["metadata"].get("annotations") or {})

    def wait_for(what: str, ok: Any, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while not ok():
            if time.monotonic() > deadline:
                raise RuntimeError(f"gave up after {seconds:.0f} s waiting for {what}")
            time.sleep(0.1)

    wait_for(
        "the operator's PodGroups", lambda: all(podgroup_annotations(n) is not None for n in [*names, warmup])
    )
    procs.append(
        _common.spawn(
            [sys.executable, "manage.py", "decide", "--processes", str(args.processes)], cwd=REPO, env=env
        )
    )
    sim.inject_fault("default", warmup, rank=1, fault_type="uce", recovers=True)
    wait_for(
        "the decider's answer to the warm-up question",
        lambda: c.ANNOTATION_RESULT_FAULT in (podgroup_annotations(warmup) or {}),
    )

    confirmed: dict[str, float] = {}
    answered: dict[str, float] = {}
    standing_at_fault: dict[str, str] = {}
    final: dict[str, str] = {}
    stop = threading.Event()
    watching = threading.Event()

    def observe() -> None:
        watcher = k8s_watch.Watch()
        for event in watcher.stream(
            custom.list_namespaced_custom_object,
            c.PODGROUP_GROUP,
            c.PODGROUP_VERSION,
            "default",
            c.PODGROUP_PLURAL,
            timeout_seconds=120,
        ):
            now = time.time()
            watching.set()  # the first event is the initial list's: the watch is open
            obj = event["object"]
            name = obj["metadata"]["name"]
            if name == podgroups[warmup]:
                continue  # answered before the measurement
            annotations = obj["metadata"].get("annotations") or {}
            if annotations.get(c.ANNOTATION_CONFIRM_FAULT) and name not in confirmed:
                confirmed[name] = now
                standing_at_fault[name] = str(annotations.get(c.ANNOTATION_PLATFORM_STRATEGY, "<absent>"))
            if c.ANNOTATION_RESULT_FAULT in annotations and name in confirmed and name not in answered:
                answered[name] = now
                final[name] = str(annotations.get(c.ANNOTATION_PLATFORM_STRATEGY, ""))
            if stop.is_set() or len(answered) >= len(names):
                watcher.stop()

    thread = threading.Thread(target=observe, daemon=True)
    thread.start()
    if not watching.wait(60):
        raise RuntimeError("the bench's own PodGroup watch did not open within 60 s")
    for name in names:  # all at once
        sim.inject_fault("default", name, rank=1, fault_type="uce", recovers=True)
    deadline = time.monotonic() + 60
    while len(answered) < len(names) and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    time.sleep(5)  # let ClusterD pick the answers up (3 s poll) before its Events are counted
    reasons: dict[str, int] = {}
    for event in k8s.CoreV1Api(api).list_namespaced_event("default").items:
        reasons[event.reason] = reasons.get(event.reason, 0) + 1
    latencies = [(answered[n] - confirmed[n]) * 1000 for n in answered]
    stats = summary(latencies)
    from apps.decisions.models import Decision

    rows = Decision.objects.filter(job__cluster=cluster, written_at__isnull=False)
    rows = rows.exclude(podgroup=podgroups[warmup])
    inside = summary([d.latency_ms for d in rows if d.latency_ms is not None])
    seen_after = summary(
        [(d.created_at.timestamp() - confirmed[d.podgroup]) * 1000 for d in rows if d.podgroup in confirmed]
    )
    return {
        "jobs": len(names),
        "answered": len(answered),
        "confirm_to_strategy_ms": stats,
        "decider_question_to_written_ms": inside,
        "confirm_to_decider_seen_ms": seen_after,
        "clusterd_poll_ms": 3000,
        "ratio_median_to_poll": stats["median"] / 3000,
        "ratio_p99_to_poll": stats["p99"] / 3000,
        "goal_p99_ms": 1000,
        "standing_answer_at_fault": sorted(set(standing_at_fault.values())),
        "faults_without_standing_answer": sum(
            1 for v in standing_at_fault.values() if v.strip().strip(",") not in ("retry", "recover", "dump")
        ),
        "final_answers": sorted(set(final.values())),
        "code_508_WaitPlatStrategyTimeout": reasons.get("WaitPlatStrategyTimeout", 0),
        "code_509_events": sum(
            reasons.get(r, 0)
            for r in ("ConfirmFaultNotCleared", "WaitProcessResultFaultTimeout", "PlatformStrategyInvalid")
        ),
        "platform_strategy_events": reasons.get("PlatformStrategy", 0),
    }


if __name__ == "__main__":
    main()

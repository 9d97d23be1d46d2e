"""Benchmark: validate a policy and render it into a 64-pod AscendJob (Master 1 + Worker 63).

Run ``.venv/bin/python bench/bench_render.py [--iterations N]``. Prints the median and p99 time per
call of ``validate_policy`` + ``render`` next to a bare ``yaml.safe_dump`` of the same manifest, and a
final JSON line for CI dashboards. Goal: median <= 1 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml
from _common import percentile, timed_ms

from apps.policies.rendering import render
from apps.policies.spec import JobContext
from apps.policies.validation import validate_policy

GOAL_MEDIAN_MS = 1.0
POLICY = {
    "mindcluster_version": "7.3",
    "strategies": ["retry", "recover", "dump"],
    "fault_scheduling": "grace",
    "pod_rescheduling": True,
    "fault_retry_times": 3,
    "backoff_limit": 10,
}


def replica(role: str, count: int) -> dict[str, Any]:
    """A realistic MindSpeed-LLM pod template: downward-API env, NFS volumes, 8 NPUs."""
    volumes = ["code", "data", "output", "ascend-driver", "ascend-add-ons", "dshm", "localtime", "reset"]
    return {
        "replicas": count,
        "restartPolicy": "Never",
        "template": {
            "metadata": {"labels": {"ring-controller.atlas": "ascend-910b", "app": "pretrain"}},
            "spec": {
                "nodeSelector": {"host-arch": "huawei-arm", "accelerator-type": "module-910b-8"},
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "labelSelector": {
                                    "matchExpressions": [
                                        {"key": "job-name", "operator": "In", "values": ["llama-70b"]}
                                    ]
                                },
                                "topologyKey": "kubernetes.io/hostname",
                            }
                        ]
                    }
                },
                "containers": [
                    {
                        "name": "ascend",
                        "image": "registry.local/mindspeed-llm:2.3.0-pt2.7.1",
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["/bin/bash", "-c"],
                        "args": [
                            "cd /job/code; bash scripts/train_start.sh /job/code /job/output pretrain.py"
                        ],
                        "env": [
                            {"name": "XDL_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
                            {
                                "name": "ASCEND_VISIBLE_DEVICES",
                                "valueFrom": {
                                    "fieldRef": {"fieldPath": "metadata.annotations['huawei.com/Ascend910']"}
                                },
                            },
                            {"name": "HCCL_CONNECT_TIMEOUT", "value": "1200"},
                            {"name": "PYTORCH_NPU_ALLOC_CONF", "value": "expandable_segments:True"},
                            {"name": "HCCL_OP_RETRY_ENABLE", "value": "L0:0, L1:1, L2:1"},
                        ],
                        "ports": [{"containerPort": 2222, "name": "ascendjob-port"}],
                        "resources": {
                            "requests": {"huawei.com/Ascend910": 8, "memory": "1500Gi", "cpu": "180"},
                            "limits": {"huawei.com/Ascend910": 8, "memory": "1500Gi", "cpu": "180"},
                        },
                        "volumeMounts": [{"name": v, "mountPath": f"/mnt/{v}"} for v in volumes],
                    },
                    {"name": "log-agent", "image": "fluent-bit:3.1", "args": ["-c", "/etc/fluent-bit.conf"]},
                ],
                "volumes": [{"name": v, "hostPath": {"path": f"/data/{v}"}} for v in volumes],
            },
        },
    }


def build_job() -> dict[str, Any]:
    return {
        "apiVersion": "mindxdl.gitee.com/v1",
        "kind": "AscendJob",
        "metadata": {
            "name": "llama-70b",
            "namespace": "training",
            "labels": {"framework": "pytorch", "ring-controller.atlas": "ascend-910b", "sp-block": "32"},
            "annotations": {"huawei.com/schedule_policy": "chip8-node8"},
        },
        "spec": {
            "schedulerName": "volcano",
            "runPolicy": {"schedulingPolicy": {"minAvailable": 64, "queue": "default"}},
            "successPolicy": "AllWorkers",
            "replicaSpecs": {"Master": replica("Master", 1), "Worker": replica("Worker", 63)},
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args()

    job = build_job()

    def validate_and_render() -> object:
        result = validate_policy(POLICY, JobContext.from_manifest(job))
        assert result.spec is not None, result.to_dict()
        return render(job, result.spec)

    rendered = validate_and_render()
    assert rendered.configmap is not None  # the TaskD path: the most work per render

    samples = timed_ms(validate_and_render, args.iterations, args.warmup)
    baseline = timed_ms(lambda: yaml.safe_dump(job), args.iterations // 4 or 1, args.warmup // 4)
    median, baseline_median = statistics.median(samples), statistics.median(baseline)
    p99 = percentile(samples, 99)
    ratio = median / baseline_median
    print(f"validate_policy + render, 64 pods ({args.iterations} calls after {args.warmup} warm-up):")
    print(f"  median {median:.3f} ms   p99 {p99:.3f} ms   (goal: median <= {GOAL_MEDIAN_MS} ms)")
    print(f"yaml.safe_dump of the same manifest: median {baseline_median:.3f} ms")
    print(f"ratio render / safe_dump (medians): {ratio:.2f}")
    summary = {
        "bench": "render",
        "median_ms": round(median, 4),
        "p99_ms": round(p99, 4),
        "baseline_median_ms": round(baseline_median, 4),
        "ratio": round(ratio, 3),
        "goal_median_ms": GOAL_MEDIAN_MS,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""An AscendJob shaped like the seed documents, for the renderer's tests."""

from __future__ import annotations

from typing import Any


def seed_job(
    *, framework: str = "pytorch", workers: int = 3, npus: int = 8, name: str = "gpt-pretrain"
) -> dict:
    """A small AscendJob shaped like the seeds: a leader and a Worker, each with container ``ascend``."""
    leader = "Scheduler" if framework == "mindspore" else "Master"

    def replica(role: str, count: int) -> dict[str, Any]:
        return {
            "replicas": count,
            "restartPolicy": "Never",
            "template": {
                "metadata": {"labels": {"ring-controller.atlas": "ascend-910b"}},
                "spec": {
                    "nodeSelector": {"host-arch": "huawei-arm"},
                    "containers": [
                        {
                            "name": "ascend",
                            "image": "mindspeed-llm:2.3.0",
                            "command": ["/bin/bash", "-c"],
                            "args": [
                                "cd /job/code; "
                                "bash scripts/train_start.sh /job/code /job/output pretrain_gpt.py"
                            ],
                            "env": [
                                {"name": "XDL_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}
                            ],
                            "ports": [{"containerPort": 2222, "name": "ascendjob-port"}],
                            "resources": {
                                "requests": {"huawei.com/Ascend910": npus},
                                "limits": {"huawei.com/Ascend910": npus},
                            },
                            "volumeMounts": [{"name": "code", "mountPath": "/job/code"}],
                        }
                    ],
                    "volumes": [{"name": "code", "hostPath": {"path": "/data/code"}}],
                },
            },
        }

    return {
        "apiVersion": "mindxdl.gitee.com/v1",
        "kind": "AscendJob",
        "metadata": {
            "name": name,
            "namespace": "training",
            "labels": {"framework": framework, "ring-controller.atlas": "ascend-910b"},
        },
        "spec": {
            "schedulerName": "volcano",
            "runPolicy": {"schedulingPolicy": {"minAvailable": 1 + workers, "queue": "default"}},
            "successPolicy": "AllWorkers",
            "replicaSpecs": {leader: replica(leader, 1), "Worker": replica("Worker", workers)},
        },
    }

"""A fleet for the simulated cluster: N nodes of 8 NPUs and M running AscendJobs (issue #27, item 4).

::

    fleet: {nodes: 1000, npus_per_node: 8, jobs: 200, pods_per_job: 4, namespace: fleet}

``parse_fleet`` checks such a mapping (the ``fleet:`` key of a scenario, ``simcluster --fleet``);
``FleetSpec.manifests`` gives the jobs, created through the Kubernetes API like anyone's, and
``SimCluster.create_fleet`` waits until the operator runs them and ClusterD has their Init. The
jobs are PyTorch, one Master and ``pods_per_job - 1`` Workers of ``npus_per_node`` NPUs each, with
``recover-strategy`` ``retry,recover,dump`` and the env and ports TaskD needs for all three, so a
UCE or HCCL fault takes the retry path and the others the recover path.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from mindcluster import keys as k

FLEET_DEFAULTS: Final = {
    "nodes": 1000,
    "npus_per_node": 8,
    "jobs": 200,
    "pods_per_job": 4,
    "namespace": "fleet",
    "strategies": "retry,recover,dump",
    "release": "26.1",
}
MAX_FLEET_NODES: Final = 20_000
MAX_FLEET_JOBS: Final = 5_000
TTP_PORT: Final = 8000


class FleetSpecError(ValueError):
    """Bad fleet input; the message names the field."""


@dataclass(frozen=True)
class FleetSpec:
    nodes: int = 1000
    npus_per_node: int = 8
    jobs: int = 200
    pods_per_job: int = 4
    namespace: str = "fleet"
    strategies: str = "retry,recover,dump"
    release: str = "26.1"

    def job_name(self, index: int) -> str:
        return f"fleet-{index:04d}"

    def manifests(self) -> list[dict[str, Any]]:
        return [
            fleet_job(
                self.job_name(i),
                namespace=self.namespace,
                pods=self.pods_per_job,
                npus=self.npus_per_node,
                strategies=self.strategies,
                release=self.release,
            )
            for i in range(self.jobs)
        ]


def parse_fleet(data: Any) -> FleetSpec:
    """A ``FleetSpec`` from untrusted JSON/YAML (``True`` or ``{}`` = the defaults)."""
    if data is True or data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise FleetSpecError(f"fleet: expected a mapping, got {type(data).__name__}")
    unknown = sorted(set(map(str, data)) - set(FLEET_DEFAULTS))
    if unknown:
        raise FleetSpecError(f"fleet: unknown field(s) {unknown}; allowed: {sorted(FLEET_DEFAULTS)}")
    values = {**FLEET_DEFAULTS, **data}
    limits = {"nodes": MAX_FLEET_NODES, "npus_per_node": 64, "jobs": MAX_FLEET_JOBS, "pods_per_job": 512}
    for name, top in limits.items():
        value = values[name]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise FleetSpecError(f"fleet.{name}: expected an integer 1-{top}, got {value!r}")
    for name in ("namespace", "strategies", "release"):
        if not isinstance(values[name], str) or not values[name]:
            raise FleetSpecError(f"fleet.{name}: expected a non-empty string, got {values[name]!r}")
    spec = FleetSpec(**values)
    if spec.jobs * spec.pods_per_job > spec.nodes:
        raise FleetSpecError(
            f"fleet: {spec.jobs} jobs x {spec.pods_per_job} pods need {spec.jobs * spec.pods_per_job} "
            f"nodes of {spec.npus_per_node} NPUs; the fleet has {spec.nodes}"
        )
    return spec


def pod_template(
    npus: int = 8,
    *,
    env: list[dict[str, Any]] | None = None,
    ttp: bool = True,
    taskd: bool = True,
    pod_ip: bool = True,
) -> dict[str, Any]:
    """A pod template shaped like the MindCluster samples (container ``ascend``).

    ``pod_ip``, ``taskd`` and ``ttp`` add the env and ports the samples declare for each feature;
    the fleet and the tests' manifests build on this one shape.
    """
    env = list(env or [])
    if pod_ip:
        env.append({"name": k.ENV_POD_IP, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    if ttp:
        env.append({"name": k.ENV_TTP_PORT, "value": str(TTP_PORT)})
    ports = [{"name": k.PORT_ASCENDJOB[0], "containerPort": k.PORT_ASCENDJOB[1]}]
    if taskd:
        ports.append({"name": k.PORT_TASKD[0], "containerPort": k.PORT_TASKD[1]})
    if ttp:
        ports.append({"name": k.PORT_TTP_NAME, "containerPort": TTP_PORT})
    return {
        "metadata": {"labels": {"ring-controller.atlas": "ascend-910b"}},
        "spec": {
            "containers": [
                {
                    "name": k.CONTAINER_NAME,
                    "image": "mindspeed-dl:v1",
                    "env": env,
                    "ports": ports,
                    "resources": {
                        "limits": {"huawei.com/Ascend910": npus},
                        "requests": {"huawei.com/Ascend910": npus},
                    },
                }
            ]
        },
    }


def ascend_job(
    name: str,
    *,
    framework: str = "pytorch",
    release: str = "26.1",
    strategies: str | None = "retry,recover,dump",
    workers: int = 1,
    npus: int = 8,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    namespace: str = "default",
    backoff_limit: int | None = None,
    **template_kw: Any,
) -> dict[str, Any]:
    """An AscendJob manifest with a leader and ``workers`` workers (``template_kw``: ``pod_template``)."""
    leader = k.LEADER_ROLE[framework]
    meta_labels = {
        k.LABEL_FRAMEWORK: framework,
        "ring-controller.atlas": "ascend-910b",
        "fault-scheduling": "grace",
        k.LABEL_RELEASE: release,
        **(labels or {}),
    }
    meta_annotations = dict(annotations or {})
    if strategies is not None:
        meta_annotations[k.ANNOTATION_RECOVER_STRATEGY] = strategies
    template = pod_template(npus, **template_kw)
    run_policy: dict[str, Any] = {"schedulingPolicy": {"minAvailable": workers + 1, "queue": "default"}}
    if backoff_limit is not None:
        run_policy["backoffLimit"] = backoff_limit
    return {
        "apiVersion": k.ASCENDJOB_API_VERSION,
        "kind": k.ASCENDJOB_KIND,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": meta_labels,
            "annotations": meta_annotations,
        },
        "spec": {
            "schedulerName": "volcano",
            "runPolicy": run_policy,
            "successPolicy": "AllWorkers",
            "replicaSpecs": {
                leader: {"replicas": 1, "restartPolicy": "Never", "template": copy.deepcopy(template)},
                k.WORKER_ROLE: {
                    "replicas": workers,
                    "restartPolicy": "Never",
                    "template": copy.deepcopy(template),
                },
            },
        },
    }


def fleet_job(
    name: str, *, namespace: str, pods: int, npus: int, strategies: str, release: str
) -> dict[str, Any]:
    """One fleet AscendJob: a Master and ``pods - 1`` Workers, ``npus`` NPUs a pod."""
    return ascend_job(
        name, namespace=namespace, workers=pods - 1, npus=npus, strategies=strategies, release=release
    )

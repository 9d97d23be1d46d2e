"""Simulated Ascend operator (mindcluster.md §1.2-§1.4, §3.4).

Watches AscendJobs in every namespace. For a new job it validates like ``ascendjob_validate.go``
(Warning Event + ``JobValidFailed`` on failure), creates the Volcano PodGroup ``<job>-<uid>`` with a
copy of the job's labels and annotations, creates the pods with the env the real operator injects for
the job's release and framework, and reports ``Created`` → ``Running`` conditions.

The job's MindCluster release is read from the label ``mindcluster.io/release``, else the annotation
``recovery.mindcluster.io/release``, else assumed to be ``26.1`` (the newest release we model).

Like the real operator it copies labels/annotations to the PodGroup only when it creates it; it does
recreate a deleted PodGroup from the job's *current* metadata.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kubernetes.client.exceptions import ApiException

from apps.cluster import constants as k
from apps.policies.spec import DEFAULT_RELEASE, RELEASES, npus_in, release_at_least
from apps.simcluster.kube import Informer, Kube, rfc3339

log = logging.getLogger(__name__)

LABEL_RELEASE: Final = "mindcluster.io/release"
ANNOTATION_RELEASE: Final = "recovery.mindcluster.io/release"
ANNOTATION_RANK_INDEX: Final = "hccl/rankIndex"
LABEL_JOB_NAME: Final = "job-name"
LABEL_REPLICA_TYPE: Final = "replica-type"
LABEL_REPLICA_INDEX: Final = "replica-index"
LABEL_VERSION: Final = "version"
CLUSTERD_DOMAIN: Final = f"clusterd-grpc-svc.{k.MINDX_NAMESPACE}.svc.cluster.local"

# Validation issue code → the Warning Event reason ascendjob_validate.go records (§1.2).
OPERATOR_REASONS: Final = {
    "manifest_missing_framework": "InvalidFramework",
    "manifest_invalid_framework": "InvalidFramework",
    "manifest_invalid_replica_type": "InvalidReplicaType",
    "manifest_missing_replica_specs": "InvalidReplicaSpec",
    "manifest_replicas_out_of_range": "InvalidReplicaSpec",
    "manifest_leader_replicas": "InvalidReplicaSpec",
    "manifest_missing_leader": "InvalidReplicaSpec",
    "manifest_invalid_restart_policy": "InvalidReplicaSpec",
    "manifest_missing_containers": "InvalidContainer",
    "manifest_missing_ascend_container": "InvalidContainer",
    "manifest_empty_image": "InvalidContainer",
    "manifest_invalid_success_policy": "InvalidSuccessPolicy",
}

# Strategy → PyTorch HIGH_AVAILABILITY token / MindSpore MS_ENABLE_TFT token (env.go, §3.4).
_PT_TOKEN: Final = {
    "recover": "recover",
    "retry": "retry",
    "recover-in-place": "recover",
    "dump": "dump",
    "exit": "recover",
    "elastic-training": "elastic-training",
}
_MS_TOKENS: Final = {
    "recover": ("ARF:1",),
    "recover-in-place": ("ARF:1",),
    "exit": ("ARF:1",),
    "retry": ("UCE:1", "HCCE:1"),
    "dump": ("TTP:1",),
}
_SWITCHED: Final = ("recover", "retry", "recover-in-place", "dump", "exit")


def job_release(job: Mapping[str, Any]) -> str:
    """The job's MindCluster release: label, then annotation, then ``26.1``."""
    meta = job.get("metadata", {}) or {}
    for value in (
        (meta.get("labels") or {}).get(LABEL_RELEASE),
        (meta.get("annotations") or {}).get(ANNOTATION_RELEASE),
    ):
        if value in RELEASES:
            return str(value)
    return DEFAULT_RELEASE


def podgroup_name(job: Mapping[str, Any]) -> str:
    meta = job["metadata"]
    return f"{meta['name']}-{meta['uid']}"


def job_key(job: Mapping[str, Any]) -> str:
    """``<ns>/<name>-<uid>``: how Volcano and ClusterD key a job in their ConfigMaps."""
    meta = job["metadata"]
    return f"{meta.get('namespace', 'default')}/{meta['name']}-{meta['uid']}"


def build_podgroup(job: Mapping[str, Any]) -> dict[str, Any]:
    """The PodGroup the operator creates: all job labels and annotations copied (§1.4)."""
    meta = job["metadata"]
    spec = job.get("spec", {}) or {}
    labels = dict(meta.get("labels") or {})
    annotations = dict(meta.get("annotations") or {})
    # addPgProcessRecoverLabel (7.2.RC1+): recover-strategy present → process-recover-enable=on.
    if k.ANNOTATION_RECOVER_STRATEGY in annotations and release_at_least(job_release(job), "7.2"):
        labels[k.LABEL_PROCESS_RECOVER_ENABLE] = "on"
    scheduling = ((spec.get("runPolicy") or {}).get("schedulingPolicy")) or {}
    return {
        "apiVersion": k.PODGROUP_API_VERSION,
        "kind": k.PODGROUP_KIND,
        "metadata": {
            "name": podgroup_name(job),
            "namespace": meta.get("namespace", "default"),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": k.ASCENDJOB_API_VERSION,
                    "kind": k.ASCENDJOB_KIND,
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"minMember": total_replicas(job), "queue": scheduling.get("queue") or "default"},
    }


# --- job layout ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PodSlot:
    """One pod of a job: its role, index within the role and global pod rank."""

    role: str
    index: int
    rank: int

    def pod_name(self, job_name: str) -> str:
        return f"{job_name}-{self.role.lower()}-{self.index}"


def _replica_specs(job: Mapping[str, Any]) -> dict[str, Any]:
    specs = (job.get("spec", {}) or {}).get("replicaSpecs") or {}
    return specs if isinstance(specs, dict) else {}


def _replicas(rspec: Mapping[str, Any]) -> int:
    value = rspec.get("replicas", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def total_replicas(job: Mapping[str, Any]) -> int:
    return sum(_replicas(r) for r in _replica_specs(job).values())


def pod_slots(job: Mapping[str, Any]) -> list[PodSlot]:
    """Every pod of the job in rank order: Master/Scheduler/Chief first, then Workers, then others."""
    specs = _replica_specs(job)
    order = sorted(specs, key=lambda role: (role not in k.LEADER_ROLE.values(), role != k.WORKER_ROLE, role))
    slots: list[PodSlot] = []
    for role in order:
        for index in range(_replicas(specs[role])):
            slots.append(PodSlot(role, index, len(slots)))
    return slots


def ascend_container(template: Mapping[str, Any]) -> dict[str, Any]:
    containers = ((template.get("spec") or {}).get("containers")) or []
    return next(
        (c for c in containers if c.get("name") == k.CONTAINER_NAME), containers[0] if containers else {}
    )


def npus_per_pod(job: Mapping[str, Any], role: str) -> int:
    template = (_replica_specs(job).get(role) or {}).get("template") or {}
    return npus_in(ascend_container(template).get("resources"))


def _port(container: Mapping[str, Any], name: str, default: int) -> int:
    for port in container.get("ports") or []:
        if port.get("name") == name:
            return int(port.get("containerPort", default))
    return default


# --- env injection ---------------------------------------------------------------------------------
def _recover_strategies(job: Mapping[str, Any]) -> list[str]:
    raw = ((job["metadata"].get("annotations")) or {}).get(k.ANNOTATION_RECOVER_STRATEGY)
    if raw is None:
        return []
    return [name for name in str(raw).split(",") if name in _PT_TOKEN]


def recovery_env(job: Mapping[str, Any]) -> list[dict[str, str]]:
    """The recovery env ``env.go`` derives from ``recover-strategy`` for 7.2.RC1+ (§3.4)."""
    labels = (job["metadata"].get("labels")) or {}
    framework = labels.get(k.LABEL_FRAMEWORK)
    strategies = _recover_strategies(job)
    hot_switch = labels.get(k.LABEL_SUB_HEALTHY_STRATEGY) == "hotSwitch"
    pod_rescheduling = labels.get(k.LABEL_POD_RESCHEDULING) == "on"
    env: list[dict[str, str]] = []
    if framework == "mindspore":
        strategies = [s for s in strategies if s != "elastic-training"]  # ignored for MindSpore (§3.3)
        tokens = {token for s in strategies for token in _MS_TOKENS.get(s, ())}
        if hot_switch:
            tokens.add("ARF:1")
        if strategies or hot_switch:
            env += [
                {"name": "MINDIO_FOR_MINDSPORE", "value": "1"},
                {"name": "MS_ENABLE_THM", "value": "{HCCL_WATCHDOG:0}"},
            ]
        if pod_rescheduling:
            tokens.add("RSC:1")
        if tokens:
            env.append({"name": "MS_ENABLE_TFT", "value": "{" + ",".join(sorted(tokens)) + "}"})
    elif framework == "pytorch":
        tokens = {_PT_TOKEN[s] for s in strategies}
        if hot_switch:
            tokens.add("recover")
        if tokens:
            env += [
                {"name": "HCCL_ASYNC_ERROR_HANDLING", "value": "0"},
                {"name": "HIGH_AVAILABILITY", "value": ",".join(sorted(tokens))},
            ]
    if any(s in _SWITCHED for s in strategies) or hot_switch:
        env += [
            {"name": k.ENV_PROCESS_RECOVER, "value": "on"},
            {"name": k.ENV_ELASTIC_PROCESS_RECOVER_ENABLE, "value": "1"},
        ]
    elif "elastic-training" in strategies:
        env.append({"name": k.ENV_PROCESS_RECOVER, "value": "on"})
    if "recover-in-place" in strategies:
        env.append({"name": k.ENV_ENABLE_RESTART_FAULT_PROCESS, "value": "on"})
    return env


def injected_env(job: Mapping[str, Any], slot: PodSlot, clusterd_ip: str) -> list[dict[str, str]]:
    """Everything the operator appends to the ``ascend`` container's env for this pod (§1.4, §3.4)."""
    meta = job["metadata"]
    labels = meta.get("labels") or {}
    framework = labels.get(k.LABEL_FRAMEWORK)
    specs = _replica_specs(job)
    template = (specs.get(slot.role) or {}).get("template") or {}
    host_network = bool((template.get("spec") or {}).get("hostNetwork"))
    env = [
        {"name": k.ENV_MINDX_TASK_ID, "value": str(meta["uid"])},
        {"name": "MINDX_SERVER_IP", "value": clusterd_ip},
        {"name": "MINDX_SERVER_DOMAIN", "value": CLUSTERD_DOMAIN},
        {"name": "HostNetwork", "value": str(host_network).lower()},
        {"name": "REPLICA_TYPE", "value": slot.role.lower()},
    ]
    slots = pod_slots(job)
    leader = slots[0] if slots else slot
    leader_template = (specs.get(leader.role) or {}).get("template") or {}
    leader_port = _port(ascend_container(leader_template), k.PORT_ASCENDJOB[0], k.PORT_ASCENDJOB[1])
    local = npus_per_pod(job, slot.role)
    if framework == "pytorch":
        world = sum(npus_per_pod(job, s.role) for s in slots)
        env += [
            {"name": "MASTER_ADDR", "value": leader.pod_name(meta["name"])},
            {"name": "MASTER_PORT", "value": str(leader_port)},
            {"name": "RANK", "value": str(slot.rank)},
            {"name": "WORLD_SIZE", "value": str(world)},
            {"name": "LOCAL_WORLD_SIZE", "value": str(local)},
            {"name": "LOCAL_RANK", "value": ",".join(str(i) for i in range(local))},
        ]
    elif framework == "mindspore":
        is_scheduler = slot.role == k.LEADER_ROLE["mindspore"]
        workers = sum(npus_per_pod(job, s.role) for s in slots if s.role == k.WORKER_ROLE)
        env += [
            {"name": "MS_SCHED_HOST", "value": leader.pod_name(meta["name"])},
            {"name": "MS_SCHED_PORT", "value": str(leader_port)},
            {"name": "MS_ROLE", "value": "MS_SCHED" if is_scheduler else "MS_WORKER"},
            {"name": "MS_NODE_RANK", "value": "0" if is_scheduler else str(slot.index)},
            {"name": "MS_SERVER_NUM", "value": "0"},
            {"name": "MS_LOCAL_WORKER", "value": str(local)},
            {"name": "MS_WORKER_NUM", "value": str(workers)},
            {"name": "NPU_POD", "value": str(local > 0).lower()},
        ]
    if release_at_least(job_release(job), "7.2"):
        env += recovery_env(job)
    return env


def build_pod(
    job: Mapping[str, Any], slot: PodSlot, *, node: str, version: int, clusterd_ip: str
) -> dict[str, Any]:
    """The pod the operator creates for ``slot``: template + labels + annotations + injected env."""
    meta = job["metadata"]
    template = (_replica_specs(job).get(slot.role) or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    spec = _deep_copy(template.get("spec") or {})
    containers = spec.get("containers") or []
    ascend = next((c for c in containers if c.get("name") == k.CONTAINER_NAME), None)
    if ascend is not None:
        # Appended without de-duplication, exactly like env.go: hand-set copies show up twice.
        ascend["env"] = list(ascend.get("env") or []) + injected_env(job, slot, clusterd_ip)
    for container in containers:
        _stringify_quantities(container)
    spec["nodeName"] = node
    spec["schedulerName"] = (job.get("spec") or {}).get("schedulerName") or k.VOLCANO_SCHEDULER
    labels = {
        **(tmeta.get("labels") or {}),
        LABEL_JOB_NAME: meta["name"],
        LABEL_REPLICA_TYPE: slot.role.lower(),
        LABEL_REPLICA_INDEX: str(slot.index),
        LABEL_VERSION: str(version),
    }
    annotations = {
        **(tmeta.get("annotations") or {}),
        ANNOTATION_RANK_INDEX: str(slot.rank),
        "scheduling.k8s.io/group-name": podgroup_name(job),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": slot.pod_name(meta["name"]),
            "namespace": meta.get("namespace", "default"),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": k.ASCENDJOB_API_VERSION,
                    "kind": k.ASCENDJOB_KIND,
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


def _stringify_quantities(container: dict[str, Any]) -> None:
    """YAML turns ``huawei.com/Ascend910: 8`` into an int; the Pod API wants quantity strings."""
    for section in ("requests", "limits"):
        values = (container.get("resources") or {}).get(section)
        if isinstance(values, dict):
            container["resources"][section] = {key: str(v) for key, v in values.items()}
    for entry in container.get("env") or []:
        if "value" in entry and not isinstance(entry["value"], str):
            entry["value"] = str(entry["value"])


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _deep_copy(v) for key, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def condition(type_: str, reason: str, message: str) -> dict[str, str]:
    now = rfc3339()
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastUpdateTime": now,
        "lastTransitionTime": now,
    }


def with_condition(status: Mapping[str, Any] | None, new: dict[str, str]) -> list[dict[str, str]]:
    """kubeflow semantics: the new condition goes last; an older one of the same type is replaced and the
    previously true Running/Restarting condition is flipped to False."""
    conditions = [dict(c) for c in (status or {}).get("conditions") or [] if c.get("type") != new["type"]]
    if new["type"] in ("Running", "Restarting", "Failed", "Succeeded"):
        for cond in conditions:
            if cond.get("type") in ("Running", "Restarting") and cond.get("status") == "True":
                cond["status"] = "False"
    return [*conditions, new]


# --- node pool ---------------------------------------------------------------------------------------
class NodePool:
    """Hands out simulated node names and pod IPs (display only: nothing ever connects to them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next_node = 0
        self._next_ip = 0

    def node(self) -> str:
        with self._lock:
            self._next_node += 1
            return f"node-{self._next_node}"

    def ip(self) -> str:
        with self._lock:
            self._next_ip += 1
            return f"10.0.{self._next_ip // 250}.{self._next_ip % 250 + 2}"


# --- the controller ----------------------------------------------------------------------------------
class SimOperator:
    """The operator's reconcile loop, running in two informer threads (jobs and PodGroups)."""

    def __init__(self, kubeconfig_path: str, nodes: NodePool, clusterd_ip: str = "127.0.0.1") -> None:
        self.kube = Kube(kubeconfig_path)
        self.nodes = nodes
        self.clusterd_ip = clusterd_ip
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self._known: dict[str, str] = {}  # job uid → "<ns>/<name>" of jobs set up (or rejected)
        self._informers: list[Informer] = []

    def start(self) -> None:
        self._informers = [
            Informer("operator-jobs", self.kube.list_jobs, self._on_job, self._stop),
            Informer("operator-podgroups", self.kube.list_podgroups, self._on_podgroup, self._stop),
        ]
        for informer in self._informers:
            informer.start()
        for informer in self._informers:
            informer.synced.wait(10)

    def request_stop(self) -> None:
        """Ask the informers to stop without waiting (lets several components stop in parallel)."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        for informer in self._informers:
            informer.join(timeout=5)
        self.kube.close()

    # --- events -------------------------------------------------------------------------------------
    def _on_job(self, event_type: str, job: dict[str, Any]) -> None:
        uid = job.get("metadata", {}).get("uid")
        if not uid:
            return
        if event_type == "DELETED":
            self._teardown(job)
            return
        with self._lock:
            if uid in self._known:
                return
            self._known[uid] = f"{job['metadata'].get('namespace')}/{job['metadata']['name']}"
        if _has_condition(job, "Created") or _has_condition(job, "Failed"):
            return  # set up by an earlier run of the simulator
        self.reconcile_new_job(job)

    def _on_podgroup(self, event_type: str, podgroup: dict[str, Any]) -> None:
        if event_type != "DELETED":
            return
        owner = next(iter(podgroup.get("metadata", {}).get("ownerReferences") or []), None)
        if not owner or owner.get("kind") != k.ASCENDJOB_KIND:
            return
        job = self.kube.get_job(podgroup["metadata"]["namespace"], owner["name"])
        if (
            job is None
            or job["metadata"]["uid"] != owner.get("uid")
            or job["metadata"].get("deletionTimestamp")
        ):
            return
        log.info("PodGroup %s deleted while its job lives: recreating it", podgroup["metadata"]["name"])
        self._create_podgroup(job, phase="Running")

    # --- reconcile ----------------------------------------------------------------------------------
    def reconcile_new_job(self, job: dict[str, Any]) -> None:
        """Validate, then create PodGroup and pods, then report Created → Running."""
        meta = job["metadata"]
        namespace, name = meta.get("namespace", "default"), meta["name"]
        problems = self.validation_problems(job)
        if problems:
            for reason, message in problems:
                self.kube.event(job, reason, message, type_="Warning")
            text = "; ".join(f"{reason}: {message}" for reason, message in problems)
            self.kube.patch_job_status(
                namespace,
                name,
                {
                    "conditions": with_condition(
                        job.get("status"), {**condition("Failed", "JobValidFailed", text)}
                    )
                },
            )
            return
        self._create_podgroup(job, phase="Pending")
        status: dict[str, Any] = {
            "conditions": with_condition(
                job.get("status"),
                condition("Created", "AscendJobCreated", f"AscendJob {namespace}/{name} is created."),
            )
        }
        status["startTime"] = rfc3339()
        self.kube.patch_job_status(namespace, name, status)
        self.create_pods(job, version=0)
        self.kube.patch_podgroup_status(namespace, podgroup_name(job), {"phase": "Running"})
        self.mark_running(job, f"AscendJob {namespace}/{name} is running.")

    def validation_problems(self, job: dict[str, Any]) -> list[tuple[str, str]]:
        """(reason, message) for every operator-level validation error of the job."""
        from apps.policies.validation import validate_manifest  # a colleague's module; import late

        problems = []
        for issue in validate_manifest(job):
            reason = OPERATOR_REASONS.get(issue.code)
            if issue.severity == "error" and reason:
                problems.append((reason, issue.message))
        return problems

    def create_pods(self, job: dict[str, Any], version: int, only_ranks: set[int] | None = None) -> list[str]:
        """Create (or recreate) the job's pods; returns their names."""
        namespace = job["metadata"].get("namespace", "default")
        created = []
        for slot in pod_slots(job):
            if only_ranks is not None and slot.rank not in only_ranks:
                continue
            node = self.nodes.node()
            body = build_pod(job, slot, node=node, version=version, clusterd_ip=self.clusterd_ip)
            self.kube.create_pod(namespace, body)
            self.kube.patch_pod_status(
                namespace,
                body["metadata"]["name"],
                {
                    "phase": "Running",
                    "podIP": self.nodes.ip(),
                    "hostIP": self.nodes.ip(),
                    "startTime": rfc3339(),
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            )
            created.append(body["metadata"]["name"])
        return created

    def mark_running(self, job: dict[str, Any], message: str) -> None:
        namespace, name = job["metadata"].get("namespace", "default"), job["metadata"]["name"]
        fresh = self.kube.get_job(namespace, name) or job
        specs = _replica_specs(job)
        replica_statuses = {
            role: {
                "active": _replicas(rspec),
                "succeeded": 0,
                "failed": 0,
                "labelSelector": {"matchLabels": {LABEL_JOB_NAME: name, LABEL_REPLICA_TYPE: role.lower()}},
            }
            for role, rspec in specs.items()
        }
        self.kube.patch_job_status(
            namespace,
            name,
            {
                "conditions": with_condition(
                    fresh.get("status"), condition("Running", "AscendJobRunning", message)
                ),
                "replicaStatuses": replica_statuses,
                "lastReconcileTime": rfc3339(),
            },
        )

    def _create_podgroup(self, job: dict[str, Any], phase: str) -> None:
        body = build_podgroup(job)
        namespace = body["metadata"]["namespace"]
        try:
            self.kube.create_podgroup(namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
        self.kube.patch_podgroup_status(namespace, body["metadata"]["name"], {"phase": phase})

    def _teardown(self, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        namespace = meta.get("namespace", "default")
        with self._lock:
            self._known.pop(meta.get("uid"), None)
        for pod in self.kube.list_job_pods(namespace, meta["name"]):
            self.kube.delete_pod(namespace, pod["metadata"]["name"])
        self.kube.delete_podgroup(namespace, podgroup_name(job))


def _has_condition(job: Mapping[str, Any], type_: str) -> bool:
    return any(c.get("type") == type_ for c in ((job.get("status") or {}).get("conditions") or []))

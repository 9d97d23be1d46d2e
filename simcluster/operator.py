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

import copy
import logging
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kubernetes.client.exceptions import ApiException

from mindcluster import keys as k
from mindcluster import operator_env
from mindcluster.ascendjob import npus_in
from mindcluster.operator_env import add_recovery_env, operator_injects_env
from mindcluster.operator_validation import CONDITION_REASON_JOB_VALID_FAILED, validate_job
from mindcluster.releases import DEFAULT_RELEASE, RELEASES, release_at_least
from simcluster.kube import Informer, Kube, rfc3339

log = logging.getLogger(__name__)

LABEL_RELEASE: Final = k.LABEL_RELEASE
ANNOTATION_RELEASE: Final = k.ANNOTATION_RELEASE
ANNOTATION_RANK_INDEX: Final = "hccl/rankIndex"
LABEL_JOB_NAME: Final = "job-name"
LABEL_REPLICA_TYPE: Final = "replica-type"
LABEL_REPLICA_INDEX: Final = "replica-index"
LABEL_VERSION: Final = "version"
CLUSTERD_DOMAIN: Final = f"clusterd-grpc-svc.{k.MINDX_NAMESPACE}.svc.cluster.local"

# Volcano's queue the operator looks up when schedulingPolicy is set (ascendjob_validate.go:81-89).
QUEUE_RESOURCE: Final = ("scheduling.volcano.sh", "v1beta1", "queues")
# ascend-operator/pkg/controllers/v1/consts.go:117-118: no backoffLimit stands for unlimited.
UNSET_BACKOFF_LIMIT: Final = -1


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
    # addPgProcessRecoverLabel (job.go:479-491, from v7.2.RC1): the annotation's presence (any value)
    # → process-recover-enable=on, only at creation, and not when the job has no labels at all
    # (pg.Labels == nil returns early, job.go:480-482).
    if labels and k.ANNOTATION_RECOVER_STRATEGY in annotations and operator_injects_env(job_release(job)):
        labels[k.LABEL_PROCESS_RECOVER_ENABLE] = "on"
    scheduling = ((spec.get("runPolicy") or {}).get("schedulingPolicy")) or {}
    return {
        "apiVersion": k.PODGROUP_API_VERSION,
        "kind": k.PODGROUP_KIND,
        "metadata": {
            "name": podgroup_name(job),
            **_owned_by_job(meta, labels, annotations),
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


def recovery_env(job: Mapping[str, Any]) -> list[dict[str, str]]:
    """The recovery env the operator adds for the job's release, for a container without env."""
    return operator_env.recovery_env(job, job_release(job))


def base_env(job: Mapping[str, Any], slot: PodSlot, clusterd_ip: str) -> list[dict[str, str]]:
    """The operator's common + framework env for this pod (env.go setCommonEnv and set*Env)."""
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
    ]
    if release_at_least(job_release(job), "26.0"):
        # setCommonEnv (env.go:182, from v26.0): the replica type as written, e.g. "Master".
        env.append({"name": "REPLICA_TYPE", "value": slot.role})
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
    return env


def injected_env(job: Mapping[str, Any], slot: PodSlot, clusterd_ip: str) -> list[dict[str, str]]:
    """Everything the operator appends to an ``ascend`` container without env of its own."""
    env = base_env(job, slot, clusterd_ip)
    add_recovery_env(job, env, job_release(job))
    return env


def build_pod(
    job: Mapping[str, Any], slot: PodSlot, *, node: str, version: int, clusterd_ip: str
) -> dict[str, Any]:
    """The pod the operator creates for ``slot``: template + labels + annotations + injected env."""
    meta = job["metadata"]
    template = (_replica_specs(job).get(slot.role) or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    spec = copy.deepcopy(template.get("spec") or {})
    containers = spec.get("containers") or []
    ascend = next((c for c in containers if c.get("name") == k.CONTAINER_NAME), None)
    if ascend is not None:
        # Appended after the user's env (addEnvValue, env.go:33-38): hand-set copies show up twice.
        env = list(ascend.get("env") or []) + base_env(job, slot, clusterd_ip)
        add_recovery_env(job, env, job_release(job))
        ascend["env"] = env
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
            **_owned_by_job(meta, labels, annotations),
        },
        "spec": spec,
    }


def _owned_by_job(
    meta: dict[str, Any], labels: dict[str, Any], annotations: dict[str, Any]
) -> dict[str, Any]:
    """The metadata the operator gives every object it makes for a job: the job's namespace, the
    labels and annotations, and the job as controller owner (so deleting the job deletes them)."""
    return {
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


# --- create-time reads ------------------------------------------------------------------------------
class FaultRetryTimesError(ValueError):
    """``fault-retry-times`` is set but not an integer: the operator drops the create event."""


def read_backoff_limit(job: Mapping[str, Any]) -> int:
    """``ascendJobCreateFunc`` (ascendjob_controller.go:373-380): ``spec.runPolicy.backoffLimit`` if
    set (it wins), else label ``fault-retry-times`` (:389-402), else -1 (unlimited, consts.go:118).

    Raises FaultRetryTimesError for a non-numeric label (strconv.Atoi fails, :394-398).
    """
    backoff = ((job.get("spec") or {}).get("runPolicy") or {}).get("backoffLimit")
    if isinstance(backoff, int) and not isinstance(backoff, bool):
        return backoff
    value = ((job.get("metadata") or {}).get("labels") or {}).get(k.LABEL_FAULT_RETRY_TIMES)
    if not value:
        return UNSET_BACKOFF_LIMIT
    if not _ATOI.fullmatch(str(value)):
        raise FaultRetryTimesError(f"fault-retry-times {value!r} is not an integer")
    return int(str(value))


_ATOI: Final = re.compile(r"[+-]?[0-9]+")  # what strconv.Atoi accepts (no spaces, no underscores)

# job UID → backoff limit the operator read when it saw the job's create event. Module level so
# ClusterD (same process) can read it without a reference to the operator; cleared on delete
# (onOwnerDeleteFunc, ascendjob_controller.go:404-420).
_BACKOFF_LIMITS: dict[str, int] = {}
_BACKOFF_LOCK = threading.Lock()


def backoff_limit_at_creation(uid: str) -> int | None:
    """The restart budget the operator holds for the job: what ``backoffLimit`` / ``fault-retry-times``
    said when the job was created (later patches of the AscendJob do not change it). ``-1`` means
    unlimited; ``None`` means the operator has not seen the job (or it was deleted)."""
    with _BACKOFF_LOCK:
        return _BACKOFF_LIMITS.get(uid)


# --- node pool ---------------------------------------------------------------------------------------
class NodePool:
    """The cluster's nodes and pod IPs (display only: nothing ever connects to them).

    Unbounded by default: every pod start gets a new node name. With ``nodes`` it is a fixed fleet of
    ``nodes`` nodes of ``npus_per_node`` NPUs each (``node-0001`` ...): a pod is placed on a node with
    room for its NPUs, a recreated pod (same name) moves to another node when one has room (what a
    reschedule away from a faulty node looks like) and gives its old place back, and a deleted job's
    pods free theirs.
    """

    def __init__(self, nodes: int | None = None, npus_per_node: int = 8) -> None:
        if nodes is not None and nodes < 1:
            raise ValueError("nodes must be >= 1")
        if npus_per_node < 1:
            raise ValueError("npus_per_node must be >= 1")
        self._lock = threading.Lock()
        self._next_node = 0
        self._next_ip = 0
        self.size = nodes
        self.npus_per_node = npus_per_node
        self._free: dict[str, int] = {_fleet_node(i): npus_per_node for i in range(nodes or 0)}
        self._placed: dict[str, tuple[str, int]] = {}  # pod key → (node, NPUs it holds)

    def node(self) -> str:
        with self._lock:
            self._next_node += 1
            return f"node-{self._next_node}"

    def ip(self) -> str:
        with self._lock:
            self._next_ip += 1
            return f"10.0.{self._next_ip // 250}.{self._next_ip % 250 + 2}"

    def place(self, pod: str, npus: int) -> str:
        """The node pod ``pod`` (``namespace/name``) starts on. A fixed fleet picks the first node with
        room other than the pod's previous one (which stays a fallback), or the previous one."""
        if self.size is None:
            return self.node()
        with self._lock:
            previous = self._placed.pop(pod, None)
            if previous is not None:
                self._free[previous[0]] += previous[1]
            wanted = min(max(npus, 0), self.npus_per_node)
            node = next(
                (
                    n
                    for n, free in self._free.items()
                    if free >= wanted and (previous is None or n != previous[0])
                ),
                previous[0] if previous is not None else None,
            )
            if node is None or self._free[node] < wanted:
                # A full fleet: the pod would stay Pending in a real cluster. The simulator has no
                # Pending pods, so it shares the least-loaded node (ClusterD's spare_resources flag
                # is what models "no free node" for recovery).
                node = max(self._free, key=lambda n: self._free[n])
            self._free[node] -= min(wanted, self._free[node])
            self._placed[pod] = (node, wanted)
            return node

    def provision(self, nodes: int, npus_per_node: int) -> None:
        """Make this a fixed fleet of at least ``nodes`` nodes (a fleet scenario on a running cluster)."""
        with self._lock:
            if self.size is None:
                self.npus_per_node = npus_per_node
                self.size = 0
            for i in range(self.size, nodes):
                self._free[_fleet_node(i)] = self.npus_per_node
            self.size = max(self.size, nodes)

    def release(self, pod: str) -> None:
        """Pod ``pod`` is gone: its NPUs are free again."""
        with self._lock:
            placed = self._placed.pop(pod, None)
            if placed is not None:
                self._free[placed[0]] += placed[1]

    def free_npus(self) -> int:
        with self._lock:
            return sum(self._free.values())


def _fleet_node(index: int) -> str:
    return f"node-{index + 1:04d}"


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
        self._dropped: set[str] = set()  # uids whose create event was dropped (bad fault-retry-times)
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
            with _BACKOFF_LOCK:
                _BACKOFF_LIMITS.pop(uid, None)
            self._teardown(job)
            return
        with self._lock:
            if uid in self._known:
                if uid not in self._dropped or event_type != "MODIFIED":
                    return
                # The create event was filtered out, but an update event still enqueues the job and
                # Reconcile runs normally (no UpdateFunc predicate, ascendjob_controller.go:255-256).
                self._dropped.discard(uid)
                log.info("job %s updated after its create event was dropped: reconciling", uid)
            else:
                self._known[uid] = f"{job['metadata'].get('namespace')}/{job['metadata']['name']}"
                # controller-runtime delivers a create event for every job on (re)start too, so the
                # budget is re-read then from the job as it is (ascendjob_controller.go:361-386).
                if not self._on_create(job):
                    return
        if _has_condition(job, "Created") or _has_condition(job, "Failed"):
            return  # set up by an earlier run of the simulator
        self.reconcile_new_job(job)

    def _on_create(self, job: dict[str, Any]) -> bool:
        """``ascendJobCreateFunc``: store the budget; False when the create event is dropped."""
        uid = job["metadata"]["uid"]
        with _BACKOFF_LOCK:
            _BACKOFF_LIMITS[uid] = UNSET_BACKOFF_LIMIT  # set before the label is parsed (:374)
        try:
            limit = read_backoff_limit(job)
        except FaultRetryTimesError as exc:
            # ascendjob_controller.go:377-380: logged, the predicate returns false, nothing is
            # created and no event or condition is written until the job is next updated.
            log.error("failed to get fault-retry-times, error: %s", exc)
            with self._lock:
                self._dropped.add(uid)
            return False
        with _BACKOFF_LOCK:
            _BACKOFF_LIMITS[uid] = limit
        return True

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
        failure = validate_job(job, self._queue_error, job_release(job))
        if failure is not None:
            # validateJob stops at the first failure: one Warning Event (ascendjob_validate.go:34-38)
            # and, from v26.0.0, JobValidFailed "<reason>: <message>" (ascendjob_controller.go:148-155);
            # before, the Event only (v7.3.0 ascendjob_controller.go:148-151).
            # InvalidScaleOutConfig skips the Event (ascendjob_validate.go:49-54 leaves the deferred err nil).
            if failure.records_event:
                self.kube.event(job, failure.reason, failure.message, type_="Warning")
            if not failure.sets_condition:
                return
            self.kube.patch_job_status(
                namespace,
                name,
                {
                    "conditions": with_condition(
                        job.get("status"),
                        {**condition("Failed", CONDITION_REASON_JOB_VALID_FAILED, failure.condition_message)},
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

    def _queue_error(self, queue: str) -> str | None:
        """What Volcano answers when the queue is missing (the Get in ascendjob_validate.go:81-89)."""
        try:
            self.kube.custom.get_cluster_custom_object(*QUEUE_RESOURCE, queue or "-")
        except ApiException as exc:
            if exc.status == 404:
                return f'queues "{queue}" not found'
            raise
        return None

    def create_pods(self, job: dict[str, Any], version: int, only_ranks: set[int] | None = None) -> list[str]:
        """Create (or recreate) the job's pods; returns their names."""
        namespace = job["metadata"].get("namespace", "default")
        created = []
        for slot in pod_slots(job):
            if only_ranks is not None and slot.rank not in only_ranks:
                continue
            pod_name = slot.pod_name(job["metadata"]["name"])
            node = self.nodes.place(f"{namespace}/{pod_name}", npus_per_pod(job, slot.role))
            body = build_pod(job, slot, node=node, version=version, clusterd_ip=self.clusterd_ip)
            created_pod = self.kube.create_pod(namespace, body)
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
            self._pod_started_events(job, body, node, created_pod["metadata"].get("uid"))
        return created

    def _pod_started_events(
        self, job: dict[str, Any], body: dict[str, Any], node: str, uid: str | None
    ) -> None:
        """What ``kubectl describe`` shows for a new pod: the operator's SuccessfulCreatePod on the job
        (kubeflow/common pod control), then Volcano's Scheduled and the kubelet's container events."""
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        self.kube.event(job, "SuccessfulCreatePod", f"Created pod: {name}")
        ref = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
        }
        image = ascend_container({"spec": body["spec"]}).get("image", "")
        for reason, message, component in (
            ("Scheduled", f"Successfully assigned {namespace}/{name} to {node}", "volcano"),
            ("Pulled", f'Container image "{image}" already present on machine', "kubelet"),
            ("Created", f"Created container {k.CONTAINER_NAME}", "kubelet"),
            ("Started", f"Started container {k.CONTAINER_NAME}", "kubelet"),
        ):
            self.kube.event(ref, reason, message, component=component)

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

    # --- hotSwitch --------------------------------------------------------------------------------------
    # The real operator reacts to pod updates and deletions through its pod watch; the simulated ClusterD
    # and Volcano call these at the moment they patch or delete a pod (the simulator has no pod watch).
    def on_pod_annotated(self, job: dict[str, Any], pod_name: str, *, schedulable: bool = True) -> str | None:
        """A pod update: ``needOperatorOpe=create`` → create its backup pod (handleHotSwitch,
        pod.go:474-487); ``needOperatorOpe=delete`` → delete the pod (ascendjob_controller.go:688-691).
        Returns the backup pod's name when one was created. ``schedulable`` False: the backup pod is
        created but stays Pending (no free node)."""
        namespace = job["metadata"].get("namespace", "default")
        pod = self.kube.get_pod(namespace, pod_name)
        if pod is None:
            return None
        annotations = pod["metadata"].get("annotations") or {}
        if annotations.get(ANNOTATION_NEED_OPERATOR_OPE) == OPE_DELETE:
            self.kube.delete_pod(namespace, pod_name)
            self.nodes.release(f"{namespace}/{pod_name}")
            self.on_pod_deleted(job, pod)
            return None
        if annotations.get(ANNOTATION_NEED_OPERATOR_OPE) != OPE_CREATE:
            return None
        return self.create_hot_switch_pod(job, pod, schedulable=schedulable)

    def create_hot_switch_pod(
        self, job: dict[str, Any], old_pod: dict[str, Any], *, schedulable: bool = True
    ) -> str:
        """createHotSwitchPod (pod.go:489-525): a copy of the old pod's replica pod named
        ``<old>-hot-NNNN``, annotated inHotSwitchFlow=true, podType=backup, backupSourcePodName=<old>; then
        the old pod loses needOperatorOpe and gets backupNewPodName=<new>."""
        namespace = job["metadata"].get("namespace", "default")
        old_meta = old_pod["metadata"]
        rank = int((old_meta.get("annotations") or {}).get(ANNOTATION_RANK_INDEX, 0))
        slot = next(s for s in pod_slots(job) if s.rank == rank)
        name = hot_switch_pod_name(old_meta["name"], time.time_ns())
        version = int((old_meta.get("labels") or {}).get(LABEL_VERSION, 0))
        node = self.nodes.place(f"{namespace}/{name}", npus_per_pod(job, slot.role))
        body = build_pod(job, slot, node=node, version=version, clusterd_ip=self.clusterd_ip)
        body["metadata"]["name"] = name
        body["metadata"]["annotations"].update(
            {
                ANNOTATION_IN_HOT_SWITCH_FLOW: "true",
                ANNOTATION_POD_TYPE: POD_TYPE_BACKUP,
                ANNOTATION_BACKUP_SOURCE_POD_NAME: old_meta["name"],
            }
        )
        created = self.kube.create_pod(namespace, body)
        if schedulable:
            self.kube.patch_pod_status(
                namespace,
                name,
                {
                    "phase": "Running",
                    "podIP": self.nodes.ip(),
                    "hostIP": self.nodes.ip(),
                    "startTime": rfc3339(),
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            )
            self._pod_started_events(job, body, node, created["metadata"].get("uid"))
        else:
            self.kube.patch_pod_status(namespace, name, {"phase": "Pending"})
        self.kube.patch_pod(
            namespace,
            old_meta["name"],
            {
                "metadata": {
                    "annotations": {ANNOTATION_NEED_OPERATOR_OPE: None, ANNOTATION_BACKUP_NEW_POD_NAME: name}
                }
            },
        )
        return name

    def on_pod_deleted(self, job: dict[str, Any], pod: dict[str, Any]) -> None:
        """handleHotswitchPodDelete (ascendjob_controller.go:453-464): a deleted backup pod clears the old
        pod's inHotSwitchFlow and backupNewPodName (:499-525); a deleted old pod in the flow hands the rank
        to the backup pod, which loses podType and backupSourcePodName (:466-497)."""
        namespace = job["metadata"].get("namespace", "default")
        annotations = pod["metadata"].get("annotations") or {}
        if annotations.get(ANNOTATION_POD_TYPE) == POD_TYPE_BACKUP:
            source = annotations.get(ANNOTATION_BACKUP_SOURCE_POD_NAME, "")
            self._drop_annotations(
                namespace, source, ANNOTATION_IN_HOT_SWITCH_FLOW, ANNOTATION_BACKUP_NEW_POD_NAME
            )
        elif annotations.get(ANNOTATION_IN_HOT_SWITCH_FLOW) == "true":
            backup = annotations.get(ANNOTATION_BACKUP_NEW_POD_NAME, "")
            self._drop_annotations(namespace, backup, ANNOTATION_POD_TYPE, ANNOTATION_BACKUP_SOURCE_POD_NAME)

    def _drop_annotations(self, namespace: str, pod_name: str, *keys: str) -> None:
        """Remove ``keys`` from a pod's annotations (a merge patch with nulls), if the pod exists."""
        if pod_name and self.kube.get_pod(namespace, pod_name) is not None:
            self.kube.patch_pod(namespace, pod_name, {"metadata": {"annotations": dict.fromkeys(keys)}})

    def _teardown(self, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        namespace = meta.get("namespace", "default")
        with self._lock:
            self._known.pop(meta.get("uid"), None)
        for pod in self.kube.list_job_pods(namespace, meta["name"]):
            self.kube.delete_pod(namespace, pod["metadata"]["name"])
            self.nodes.release(f"{namespace}/{pod['metadata']['name']}")
        self.kube.delete_podgroup(namespace, podgroup_name(job))


# --- hotSwitch: the backup pod (ascend-operator pod.go:474-525, ascendjob_controller.go:453-529, 680-691;
# the names are ascend-common/api/consts.go:67-85) --------------------------------------------------------
ANNOTATION_IN_HOT_SWITCH_FLOW: Final = "inHotSwitchFlow"
ANNOTATION_NEED_OPERATOR_OPE: Final = "needOperatorOpe"
ANNOTATION_NEED_VOLCANO_OPE: Final = "needVolcanoOpe"
ANNOTATION_BACKUP_NEW_POD_NAME: Final = "backupNewPodName"
ANNOTATION_BACKUP_SOURCE_POD_NAME: Final = "backupSourcePodName"
ANNOTATION_POD_TYPE: Final = "podType"
POD_TYPE_BACKUP: Final = "backup"
OPE_CREATE: Final = "create"
OPE_DELETE: Final = "delete"


def hot_switch_pod_name(old_pod: str, now_ns: int) -> str:
    """``<old pod>-hot-<last 4 digits of the creation time in ns>`` (createHotSwitchPod, pod.go:494-497)."""
    return f"{old_pod}-hot-{str(now_ns)[-4:]}"


def _has_condition(job: Mapping[str, Any], type_: str) -> bool:
    return any(c.get("type") == type_ for c in ((job.get("status") or {}).get("conditions") or []))

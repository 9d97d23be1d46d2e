"""Simulated ClusterD: runs the pure engine against live objects and writes what the real one writes.

Per fault (mindcluster.md §7.1): flush (``reset-config-<job>``), platform handshake when the PodGroup
has ``ProcessRecoverStrategy`` (§6.4), ask TaskD what it supports, ``engine.plan``, then execute each
step: Events on the AscendJob, ``ProcessRecoverStatus`` and ``process-recover-enable`` on the PodGroup,
pod migration / Pod- / Job-level rescheduling with the ``version`` label bumped, the
``job-reschedule-reason`` history, the restart budget, and AscendJob conditions.
"""

from __future__ import annotations

import json
import logging
import queue
import random
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from apps.cluster import constants as k
from apps.simcluster.clock import SimClock
from apps.simcluster.clusterd import engine, platform
from apps.simcluster.clusterd.engine import EngineInput, RankFault, RecoveryPolicy, Step, StepKind
from apps.simcluster.hub import Hub
from apps.simcluster.injector import FaultSpec, UnknownJobError
from apps.simcluster.kube import Informer, Kube, rfc3339
from apps.simcluster.operator import (
    ANNOTATION_RANK_INDEX,
    LABEL_VERSION,
    SimOperator,
    condition,
    job_key,
    npus_per_pod,
    pod_slots,
    podgroup_name,
    with_condition,
)
from apps.simcluster.taskd import TaskdManagers

log = logging.getLogger(__name__)

VOLCANO_NAMESPACE: Final = "volcano-system"
FAULT_NPU_CONFIGMAP: Final = "vcjob-fault-npu-cm"
KEY_REMAIN_RETRY: Final = "remain-retry-times"
KEY_RESCHEDULE_RECORDS: Final = "recent-reschedule-records"
MAX_RESCHEDULE_RECORDS: Final = 10
COMPONENT: Final = "clusterd"

TOPIC_FAULT: Final = "fault"
TOPIC_JOB: Final = "job"


def topic_process(job_uid: str) -> str:
    """Hub topic of the ProcessManageSignals for one job (gRPC ``SubscribeProcessManageSignal``)."""
    return f"process:{job_uid}"


# reset.json Policy per handling level (§6.3).
_RESET_POLICY: Final = {
    "": "",
    "NotHandleFault": "ignore",
    "SubHealthFault": "ignore",
    "RestartRequest": "restart_request",
    "RestartBusiness": "restart",
    "FreeRestartNPU": "free_reset",
    "RestartNPU": "reset",
    "PreSeparateNPU": "isolate",
    "SeparateNPU": "isolate",
    "ManuallySeparateNPU": "isolate",
    "PreSeparateFault": "isolate",
    "SeparateFault": "isolate",
}


@dataclass
class ActiveFault:
    """A fault ClusterD currently reports on its fault stream."""

    spec: FaultSpec
    job_uid: str
    node: str
    node_ip: str
    rank_fault: RankFault
    started: float = field(default_factory=time.monotonic)


@dataclass
class JobRecord:
    """What ClusterD remembers about a job (for summaries and the Recover service)."""

    namespace: str
    name: str
    uid: str
    framework: str
    status: str = "pending"
    init_done: bool = False


class ClusterD:
    """The simulated ClusterD: one recovery worker per job, fed by ``inject``."""

    def __init__(
        self,
        kubeconfig_path: str,
        clock: SimClock,
        operator: SimOperator,
        taskd: TaskdManagers,
        *,
        seed: int | None = None,
        spare_resources: bool = True,
    ) -> None:
        self.kube = Kube(kubeconfig_path)
        self.clock = clock
        self.operator = operator
        self.taskd = taskd
        self.hub = Hub()
        self.rng = random.Random(seed)
        self.spare_resources = spare_resources
        self.confirm_refusals = 0  # times ProcessConfirmFault could not be written (not cleared)
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self._idle = threading.Condition(self._lock)
        self._busy = 0
        self._queues: dict[str, queue.Queue[FaultSpec]] = {}
        self._workers: dict[str, threading.Thread] = {}
        self._faults: dict[str, list[ActiveFault]] = {}  # job uid → active faults
        self.jobs: dict[str, JobRecord] = {}  # job uid → record
        self._reschedules: dict[str, int] = {}  # job uid → reschedules done
        self._informer: Informer | None = None
        self.history: list[tuple[str, list[Step]]] = []  # (fault id, steps) for tests and what-if

    # --- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        self.kube.ensure_namespace(VOLCANO_NAMESPACE)
        self._informer = Informer("clusterd-jobs", self.kube.list_jobs, self._on_job, self._stop)
        self._informer.start()
        self._informer.synced.wait(10)

    def request_stop(self) -> None:
        """Ask the informer and workers to stop without waiting."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        if self._informer:
            self._informer.join(timeout=5)
        for worker in list(self._workers.values()):
            worker.join(timeout=5)
        self.kube.close()

    # --- job tracking -------------------------------------------------------------------------------
    def _on_job(self, event_type: str, job: dict[str, Any]) -> None:
        meta = job.get("metadata", {})
        uid = meta.get("uid")
        if not uid:
            return
        if event_type == "DELETED":
            with self._lock:
                record = self.jobs.pop(uid, None)
            if record:
                self.hub.publish(TOPIC_JOB, self.summary(record, "delete"))
            return
        status = _job_status(job)
        with self._lock:
            record = self.jobs.get(uid)
            is_new = record is None
            if record is None:
                record = JobRecord(
                    meta.get("namespace", "default"),
                    meta["name"],
                    uid,
                    (meta.get("labels") or {}).get(k.LABEL_FRAMEWORK, ""),
                )
                self.jobs[uid] = record
            changed = is_new or record.status != status
            record.status = status
        if changed:
            self.hub.publish(TOPIC_JOB, self.summary(record, "add"))
        if status == "running":
            self.taskd.start_manager(job)

    def summary(self, record: JobRecord, operator: str) -> dict[str, str]:
        """A ``JobSummarySignal`` as a dict (the gRPC layer turns it into the message)."""
        return {
            "uuid": str(uuid.uuid4()),
            "jobId": record.uid,
            "jobName": record.name,
            "namespace": record.namespace,
            "frameWork": record.framework,
            "jobStatus": record.status,
            "time": str(int(time.time())),
            "operator": operator,
            "deleteTime": str(int(time.time())) if operator == "delete" else "",
        }

    def job_summaries(self) -> list[dict[str, str]]:
        with self._lock:
            return [self.summary(r, "add") for r in self.jobs.values()]

    def find_job_by_uid(self, uid: str) -> JobRecord | None:
        with self._lock:
            return self.jobs.get(uid)

    # --- fault state (fault.Fault stream) -----------------------------------------------------------
    def fault_snapshot(self) -> dict[str, list[ActiveFault]]:
        with self._lock:
            return {uid: list(faults) for uid, faults in self._faults.items() if faults}

    def _set_faults(self, uid: str, faults: list[ActiveFault]) -> None:
        def update() -> None:
            if faults:
                self._faults[uid] = faults
            else:
                self._faults.pop(uid, None)

        self.hub.publish(TOPIC_FAULT, (uid, list(faults)), update=update)

    # --- injection ----------------------------------------------------------------------------------
    def inject(self, spec: FaultSpec) -> str:
        """Queue ``spec`` for its job's recovery worker; raises ``UnknownJobError`` for unknown jobs/ranks."""
        job = self.kube.get_job(spec.namespace, spec.job)
        if job is None:
            raise UnknownJobError(f"job {spec.namespace}/{spec.job} not found")
        slots = pod_slots(job)
        if spec.rank >= len(slots):
            raise UnknownJobError(
                f"job {spec.namespace}/{spec.job} has no pod rank {spec.rank} (it has {len(slots)} pods)"
            )
        uid = job["metadata"]["uid"]
        with self._lock:
            self._busy += 1
            work = self._queues.setdefault(uid, queue.Queue())
            work.put(spec)
            worker = self._workers.get(uid)
            if worker is None or not worker.is_alive():
                worker = threading.Thread(
                    target=self._work, args=(uid,), name=f"clusterd-{spec.job}", daemon=True
                )
                self._workers[uid] = worker
                worker.start()
        return spec.id

    def wait_idle(self, timeout: float) -> bool:
        """Block until no recovery is queued or running; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def _work(self, uid: str) -> None:
        work = self._queues[uid]
        while not self._stop.is_set():
            try:
                spec = work.get(timeout=0.2)
            except queue.Empty:
                with self._lock:
                    if work.empty():
                        self._workers.pop(uid, None)
                        return
                continue
            try:
                self.handle_fault(spec)
            except Exception:
                log.exception("ClusterD failed to handle %s", spec.id)
            finally:
                with self._idle:
                    self._busy -= 1
                    self._idle.notify_all()

    # --- one fault event ----------------------------------------------------------------------------
    def handle_fault(self, spec: FaultSpec) -> list[Step]:
        """Run the whole §7.1 flow for one injected fault; returns the steps taken."""
        job = self.kube.get_job(spec.namespace, spec.job)
        if job is None:
            return []
        run = _FaultRun(self, job, spec)
        return run.execute()

    def restart_budget(self, job: Mapping[str, Any]) -> int | None:
        """Reschedules left: ``runPolicy.backoffLimit`` and the ``fault-retry-times`` remain count."""
        uid = job["metadata"]["uid"]
        limits: list[int] = []
        backoff = ((job.get("spec") or {}).get("runPolicy") or {}).get("backoffLimit")
        if isinstance(backoff, int) and backoff > 0:
            limits.append(backoff - self._reschedules.get(uid, 0))
        retry_times = _int_label(job, k.LABEL_FAULT_RETRY_TIMES)
        if retry_times > 0:
            limits.append(self._remain_retry_times(job, retry_times))
        return min(limits) if limits else None

    def _remain_retry_times(self, job: Mapping[str, Any], initial: int) -> int:
        cm = self.kube.get_configmap(VOLCANO_NAMESPACE, FAULT_NPU_CONFIGMAP)
        remain = _loads((cm or {}).get("data", {}).get(KEY_REMAIN_RETRY))
        entry = remain.get(job_key(job))
        return int(entry["Times"]) if isinstance(entry, dict) and "Times" in entry else initial

    def consume_budget(self, job: Mapping[str, Any]) -> None:
        uid = job["metadata"]["uid"]
        with self._lock:
            self._reschedules[uid] = self._reschedules.get(uid, 0) + 1
        retry_times = _int_label(job, k.LABEL_FAULT_RETRY_TIMES)
        if retry_times > 0:
            cm = self.kube.get_configmap(VOLCANO_NAMESPACE, FAULT_NPU_CONFIGMAP)
            remain = _loads((cm or {}).get("data", {}).get(KEY_REMAIN_RETRY))
            left = self._remain_retry_times(job, retry_times) - 1
            remain[job_key(job)] = {"UUID": uid, "Times": max(0, left)}
            self.kube.upsert_configmap(
                VOLCANO_NAMESPACE, FAULT_NPU_CONFIGMAP, {KEY_REMAIN_RETRY: json.dumps(remain, sort_keys=True)}
            )

    def reschedule_count(self, uid: str) -> int:
        with self._lock:
            return self._reschedules.get(uid, 0)


class _FaultRun:
    """Executes one fault event for one job (kept separate so state stays local to the event)."""

    def __init__(self, clusterd: ClusterD, job: dict[str, Any], spec: FaultSpec) -> None:
        self.cd = clusterd
        self.kube = clusterd.kube
        self.clock = clusterd.clock
        self.job = job
        self.spec = spec
        meta = job["metadata"]
        self.namespace = meta.get("namespace", "default")
        self.name = meta["name"]
        self.uid = meta["uid"]
        self.pg_name = podgroup_name(job)
        self.reset_state: dict[str, Any] = {}
        self.active: ActiveFault | None = None

    # --- helpers ------------------------------------------------------------------------------------
    def event(self, reason: str, message: str, warning: bool = False) -> None:
        self.kube.event(
            self.job, reason, message, type_="Warning" if warning else "Normal", component=COMPONENT
        )

    def sleep(self, sim_seconds: float) -> None:
        self.clock.sleep(sim_seconds, self.cd._stop)

    def podgroup(self) -> dict[str, Any] | None:
        return self.kube.get_podgroup(self.namespace, self.pg_name)

    def patch_podgroup(
        self, labels: Mapping[str, str] | None = None, annotations: Mapping[str, str | None] | None = None
    ) -> None:
        meta: dict[str, Any] = {}
        if labels:
            meta["labels"] = dict(labels)
        if annotations:
            meta["annotations"] = dict(annotations)
        try:
            self.kube.patch_podgroup(self.namespace, self.pg_name, {"metadata": meta})
        except Exception as exc:  # the PodGroup may be gone (deleted by a test); ClusterD logs and moves on
            log.warning("cannot patch PodGroup %s: %s", self.pg_name, exc)

    def write_reset(self, **changes: Any) -> None:
        self.reset_state.update(changes)
        self.kube.upsert_configmap(
            self.namespace,
            f"{k.RESET_CONFIGMAP_PREFIX}{self.name}",
            {"reset.json": json.dumps(self.reset_state), "checkCode": ""},
        )

    def set_rank_status(self, status: str) -> None:
        ranks = [dict(r, Status=status) for r in self.reset_state.get("RankList", [])]
        self.write_reset(RankList=ranks)

    def signal(
        self, signal_type: str, actions: list[str], change_strategy: str = "", timeout: int = 0
    ) -> None:
        fault = self.active.rank_fault if self.active else None
        message = {
            "uuid": str(uuid.uuid4()),
            "jobId": self.uid,
            "signalType": signal_type,
            "actions": actions,
            "faultRanks": [{"rankId": str(fault.rank), "faultType": fault.fault_type}] if fault else [],
            "changeStrategy": change_strategy,
            "timeout": timeout,
            "nodeRankIds": [str(fault.pod_rank)] if fault else [],
            "extraParams": json.dumps({"scale-in-strategy": "DP"}) if change_strategy == "downgrade" else "",
        }
        self.cd.hub.publish(topic_process(self.uid), message)

    def set_condition(self, type_: str, reason: str, message: str) -> None:
        fresh = self.kube.get_job(self.namespace, self.name) or self.job
        self.kube.patch_job_status(
            self.namespace,
            self.name,
            {
                "conditions": with_condition(fresh.get("status"), condition(type_, reason, message)),
                "lastReconcileTime": rfc3339(),
            },
        )

    # --- the flow -----------------------------------------------------------------------------------
    def execute(self) -> list[Step]:
        pods = self.kube.list_job_pods(self.namespace, self.name)
        pod = next(
            (
                p
                for p in pods
                if p["metadata"].get("annotations", {}).get(ANNOTATION_RANK_INDEX) == str(self.spec.rank)
            ),
            None,
        )
        node = (pod or {}).get("spec", {}).get("nodeName", "")
        slot = pod_slots(self.job)[self.spec.rank]
        per_pod = max(1, npus_per_pod(self.job, slot.role))
        rank_fault = RankFault(
            rank=self.spec.rank * per_pod + min(self.spec.device, per_pod - 1),
            pod_rank=self.spec.rank,
            node=node,
            fault_type=self.spec.fault_type,
            level=self.spec.effective_level,
            code=self.spec.effective_code,
            node_fault=self.spec.node_fault,
        )
        self.active = ActiveFault(
            self.spec, self.uid, node, (pod or {}).get("status", {}).get("hostIP", ""), rank_fault
        )
        with self.cd._lock:
            current = list(self.cd._faults.get(self.uid, []))
        self.cd._set_faults(self.uid, [*current, self.active])
        what = (
            f"{self.spec.kind} fault (code {rank_fault.code or '-'}, level {rank_fault.level or 'business'})"
        )
        self.event(
            "FaultDetected",
            f"{what} on pod rank {self.spec.rank} (process rank {rank_fault.rank}, "
            f"node {node}) [{self.spec.id}]",
            warning=True,
        )
        self.write_reset(
            RankList=[
                {
                    "RankId": str(rank_fault.rank),
                    "LogicId": str(self.spec.device),
                    "Status": "unrecovered",
                    "Policy": _RESET_POLICY.get(rank_fault.level, "restart"),
                    "InitialPolicy": _RESET_POLICY.get(rank_fault.level, "restart"),
                    "ErrorCode": int(rank_fault.code, 16) if rank_fault.code else 0,
                    "ErrorCodeHex": rank_fault.code,
                }
            ],
            FaultFlushing=True,
            RestartFaultProcess=False,
            RestartType="podReschedule",
            RetryTime=0,
            GracefulExit=0,
        )
        podgroup = self.podgroup() or {"metadata": self.job["metadata"]}
        pg_meta = podgroup["metadata"]
        policy = RecoveryPolicy.from_podgroup(pg_meta.get("labels") or {}, pg_meta.get("annotations") or {})
        supported: frozenset[str] = frozenset()
        platform_choice: str | None = None
        timed_out = False
        handshake = platform.start(self) if policy.platform_mode else None  # platform.py: the real order
        if policy.process_recovery_on and policy.process_strategies:
            if handshake is None or handshake.wait_standing():  # 1: before anything is stopped or written
                self.signal("stopTrain", ["stop_train"], timeout=900)
                self.sleep(engine.PHASE_SECONDS["detect"])
                faults = platform.confirm_faults([rank_fault], per_pod)
                if handshake is None or handshake.confirm(faults):  # 2-3: before the globalFault signal
                    self.signal("globalFault", ["on_global_rank"])
                    support, reasons = self.cd.taskd.supported_strategies(self.job)
                    supported = frozenset(support)
                    if reasons:
                        self.event(
                            "TaskDStrategies",
                            f"TaskD reports {sorted(supported) or 'nothing'}; " + "; ".join(reasons),
                        )
            if handshake is not None:
                platform_choice, timed_out = handshake.choice, handshake.timed_out
        inputs = EngineInput(
            policy=policy,
            supported=supported,
            faults=(rank_fault,),
            platform_choice=platform_choice,
            platform_timed_out=timed_out,
            spare_resources=self.cd.spare_resources,
            restart_budget=self.cd.restart_budget(self.job),
        )

        def outcome(strategy: str, attempt: int) -> bool:
            succeeds = self.spec.outcome(attempt, self.cd.rng)
            if strategy == "recover" and handshake is not None and not handshake.timed_out:
                return handshake.rank_table_ready() and succeeds  # 4: RankTableReady gates recover
            return succeeds

        steps = engine.plan(inputs, outcome)
        with self.cd._lock:
            self.cd.history.append((self.spec.id, steps))
        for step in steps:
            if self.cd._stop.is_set():
                break
            self.run_step(step, inputs)
        return steps

    def run_step(self, step: Step, inputs: EngineInput) -> None:
        kind = step.kind
        if kind == StepKind.PLATFORM_TIMEOUT:
            return  # already reported by the handshake
        if kind == StepKind.CHOOSE:
            self.event("StrategyChosen", f"{step.strategy}: {step.reason}")
        elif kind == StepKind.ATTEMPT:
            self.attempt(step)
        elif kind in (StepKind.SUCCEEDED, StepKind.FAILED):
            if step.recover_status:
                self.patch_podgroup(annotations={k.ANNOTATION_RECOVER_STATUS: step.recover_status})
            if kind == StepKind.SUCCEEDED:
                self.set_rank_status("recovered")
                self.event("RecoverSucceeded", f"{step.strategy} succeeded ({step.recover_status})")
            else:
                self.set_rank_status("failed")
                self.event("RecoverFailed", f"{step.strategy} failed ({step.recover_status})", warning=True)
        elif kind == StepKind.EXIT:
            self.signal("changeStrategy", ["change_strategy"], change_strategy="exit")
            self.sleep(step.duration_s)
            if step.recover_status:
                self.patch_podgroup(annotations={k.ANNOTATION_RECOVER_STATUS: step.recover_status})
            self.write_reset(GracefulExit=1)
            self.event("ProcessExited", "training processes stopped (exit-completed); " + step.reason)
        elif kind in (StepKind.PAUSE, StepKind.RESUME):
            self.patch_podgroup(labels=step.label_changes)
            value = step.label_changes.get(k.LABEL_PROCESS_RECOVER_ENABLE, "")
            self.event(
                "ProcessRecoverPaused" if kind == StepKind.PAUSE else "ProcessRecoverResumed",
                f"{k.LABEL_PROCESS_RECOVER_ENABLE}={value}: {step.reason}",
            )
        elif kind in (StepKind.POD_RESCHEDULE, StepKind.JOB_RESCHEDULE):
            self.reschedule(step, inputs)
        elif kind == StepKind.JOB_FAILED:
            self.set_condition("Failed", "JobFailed", step.reason)
            self.event("JobFailed", step.reason, warning=True)
            self.finish()
        elif kind == StepKind.DONE:
            self.finish()

    def attempt(self, step: Step) -> None:
        assert step.strategy is not None
        retry_time = int(self.reset_state.get("RetryTime", 0)) + 1
        in_place = step.strategy == "recover-in-place"
        self.write_reset(RetryTime=retry_time, RestartFaultProcess=in_place)
        action = "save_and_exit" if step.signal == "saveAndExit" else "change_strategy"
        self.signal(step.signal or "changeStrategy", [action], change_strategy=step.change_strategy or "")
        if step.strategy == "recover" and step.pod_ranks:
            self.migrate(step.pod_ranks)
        self.sleep(step.duration_s)

    def migrate(self, pod_ranks: tuple[int, ...]) -> None:
        """recover: the faulty pods are deleted and started again on healthy nodes (same version)."""
        version = self.current_version()
        for slot in pod_slots(self.job):
            if slot.rank in pod_ranks:
                self.kube.delete_pod(self.namespace, slot.pod_name(self.name))
        self.cd.operator.create_pods(self.job, version=version, only_ranks=set(pod_ranks))

    def current_version(self) -> int:
        pods = self.kube.list_job_pods(self.namespace, self.name)
        return max((int(p["metadata"].get("labels", {}).get(LABEL_VERSION, 0)) for p in pods), default=0)

    def reschedule(self, step: Step, inputs: EngineInput) -> None:
        pod_level = step.kind == StepKind.POD_RESCHEDULE
        self.set_condition("Restarting", "jobRestarting", step.reason)
        slots = pod_slots(self.job)
        ranks = set(step.pod_ranks) if pod_level else {s.rank for s in slots}
        version = self.current_version() + 1
        pods_before = {p["metadata"]["name"]: p for p in self.kube.list_job_pods(self.namespace, self.name)}
        for slot in slots:
            if slot.rank in ranks:
                self.kube.delete_pod(self.namespace, slot.pod_name(self.name))
        self.sleep(step.duration_s)
        self.cd.consume_budget(self.job)
        self.record_reschedule([s for s in slots if s.rank in ranks], pods_before)
        self.cd.operator.create_pods(self.job, version=version, only_ranks=ranks)
        reason = "PodRescheduled" if pod_level else "JobRescheduled"
        scope = f"pods {sorted(ranks)}" if pod_level else "all pods"
        self.event(reason, f"{scope} recreated with {LABEL_VERSION}={version}: {step.reason}")
        self.cd.operator.mark_running(self.job, f"AscendJob {self.namespace}/{self.name} is running again.")

    def record_reschedule(self, slots: list[Any], pods_before: Mapping[str, Any]) -> None:
        cm = self.kube.get_configmap(k.MINDX_NAMESPACE, k.RESCHEDULE_REASON_CONFIGMAP)
        records = _loads((cm or {}).get("data", {}).get(KEY_RESCHEDULE_RECORDS))
        key = job_key(self.job)
        entry = records.get(key) if isinstance(records.get(key), dict) else None
        entry = entry or {"JobID": key, "TotalRescheduleTimes": 0, "RescheduleRecords": []}
        fault = self.active.rank_fault if self.active else None
        reason = (
            "NodeUnhealthy"
            if fault and fault.node_fault
            else "CardUnhealthy"
            if fault and fault.level
            else "pod-failed"
        )
        now = datetime.now(UTC)  # wall time, like the Events: the clock only scales durations
        entry["TotalRescheduleTimes"] = int(entry.get("TotalRescheduleTimes", 0)) + 1
        entry["RescheduleRecords"] = [
            {
                "LogFileFormatTime": now.strftime("%Y-%m-%d %H:%M:%S"),
                "RescheduleTimeStamp": int(now.timestamp()),
                "ReasonOfTask": [
                    {
                        "RescheduleReason": reason if fault and slot.rank == fault.pod_rank else "pod-failed",
                        "PodName": slot.pod_name(self.name),
                        "NodeName": pods_before.get(slot.pod_name(self.name), {})
                        .get("spec", {})
                        .get("nodeName", ""),
                        "NodeRankIndex": str(slot.rank),
                    }
                    for slot in slots
                ],
            },
            *entry.get("RescheduleRecords", []),
        ][:MAX_RESCHEDULE_RECORDS]
        records[key] = entry
        self.kube.ensure_namespace(k.MINDX_NAMESPACE)
        self.kube.upsert_configmap(
            k.MINDX_NAMESPACE,
            k.RESCHEDULE_REASON_CONFIGMAP,
            {KEY_RESCHEDULE_RECORDS: json.dumps(records, sort_keys=True)},
        )

    def finish(self) -> None:
        self.write_reset(FaultFlushing=False, RestartFaultProcess=False)
        with self.cd._lock:
            remaining = [f for f in self.cd._faults.get(self.uid, []) if f is not self.active]
        self.cd._set_faults(self.uid, remaining)


def _job_status(job: Mapping[str, Any]) -> str:
    """pending / running / failed / complete, from the last true condition."""
    conditions = [c for c in ((job.get("status") or {}).get("conditions") or []) if c.get("status") == "True"]
    last = conditions[-1]["type"] if conditions else ""
    return {"Running": "running", "Restarting": "pending", "Failed": "failed", "Succeeded": "complete"}.get(
        last, "pending"
    )


def _int_label(job: Mapping[str, Any], key: str) -> int:
    try:
        return int(((job.get("metadata") or {}).get("labels") or {}).get(key, 0))
    except (TypeError, ValueError):
        return 0


def _loads(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}

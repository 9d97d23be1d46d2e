"""Simulated ClusterD: runs the pure engine against live objects and writes what the real one writes.

``Init`` (called by the job's agent when its pods start, or by a real client over gRPC) snapshots the
recovery config from the PodGroup once, like ``GetRecoverBaseInfo`` at the first ``Init``
(fault_recover_service.go:570-592); the snapshot lives until the PodGroup is deleted
(fault_recover_service.go:68-74). Each snapshot is published as a Kubernetes Event on the PodGroup,
reason ``InitSuccess`` (or ``ProcessRecoverEnableOff`` for a refused Init, code 403), message
``job(uid=<uid>) init success; config=<JSON>`` with the keys of ``RecoveryPolicy.describe``.

Per fault: flush (``reset-config-<job>``), platform handshake when the snapshot says platform mode,
ask the agent what it supports, ``engine.plan`` over the snapshot, then execute each step: Events on
the AscendJob, ``ProcessRecoverStatus`` and ``process-recover-enable`` on the PodGroup, pod
migration / Pod- / Job-level rescheduling with the ``version`` label bumped, the
``job-reschedule-reason`` history, the restart budget, and AscendJob conditions. Live keys
(``wait-reschedule-timeout``, the platform's answers, ``RankTableReady``) are read at fault time.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import queue
import random
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final

from mindcluster import clusterd as engine
from mindcluster import faults as vocab
from mindcluster import keys as k
from mindcluster import reset_json
from mindcluster.clusterd import EngineInput, RankFault, RecoveryPolicy, Step, StepKind
from mindcluster.releases import DEFAULT_RELEASE, RELEASES, release_at_least
from simcluster.clock import SimClock
from simcluster.clusterd import platform
from simcluster.hub import Hub
from simcluster.injector import FaultSpec, UnknownJobError
from simcluster.kube import Informer, Kube, rfc3339
from simcluster.operator import (
    ANNOTATION_BACKUP_NEW_POD_NAME,
    ANNOTATION_IN_HOT_SWITCH_FLOW,
    ANNOTATION_NEED_OPERATOR_OPE,
    ANNOTATION_NEED_VOLCANO_OPE,
    ANNOTATION_POD_TYPE,
    ANNOTATION_RANK_INDEX,
    LABEL_VERSION,
    OPE_CREATE,
    OPE_DELETE,
    POD_TYPE_BACKUP,
    SimOperator,
    backoff_limit_at_creation,
    condition,
    job_key,
    npus_per_pod,
    pod_slots,
    podgroup_name,
    with_condition,
)
from simcluster.taskd import TaskdManagers

log = logging.getLogger(__name__)

VOLCANO_NAMESPACE: Final = "volcano-system"
FAULT_NPU_CONFIGMAP: Final = "vcjob-fault-npu-cm"
KEY_REMAIN_RETRY: Final = "remain-retry-times"
KEY_RESCHEDULE_RECORDS: Final = "recent-reschedule-records"
MAX_RESCHEDULE_RECORDS: Final = 10
COMPONENT: Final = "clusterd"
EVENT_INIT: Final = "InitSuccess"
EVENT_INIT_REFUSED: Final = "ProcessRecoverEnableOff"
INIT_MESSAGE_PREFIX: Final = "init success; config="

NOT_RELEASE_SLEEP_S: Final = 10.0  # constant.NotReleaseSleepTime (clusterd constants.go:283-287)
INIT_RETRY_S: Final = 1.0  # TaskD's manager retries Init 1 s after a failure (td/manager.go:468-523)

TOPIC_FAULT: Final = "fault"
TOPIC_JOB: Final = "job"


def topic_process(job_uid: str) -> str:
    """Hub topic of the ProcessManageSignals for one job (gRPC ``SubscribeProcessManageSignal``)."""
    return f"process:{job_uid}"


@dataclass
class ActiveFault:
    """A fault ClusterD currently reports on its fault stream."""

    spec: FaultSpec
    job_uid: str
    node: str
    node_ip: str
    rank_fault: RankFault
    started: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class InitRecord:
    """What one ``Init`` call read: code 0 and the snapshot, or 403 and what it refused on."""

    code: int
    policy: RecoveryPolicy
    podgroup_uid: str = ""
    at: float = field(default_factory=time.time)

    @property
    def accepted(self) -> bool:
        return self.code == engine.CODE_OK


def init_event_message(uid: str, record: InitRecord) -> str:
    """The Event message for an Init: fixed prefix, then the snapshot as sorted JSON."""
    config = json.dumps(record.policy.describe(), sort_keys=True)
    if record.accepted:
        return f"job(uid={uid}) {INIT_MESSAGE_PREFIX}{config}"
    return f"job(uid={uid}) init refused (code {record.code}); config={config}"


def parse_init_event(message: str) -> dict[str, Any] | None:
    """The snapshotted config from an ``InitSuccess`` Event message (for the product's reader)."""
    _, sep, rest = message.partition(INIT_MESSAGE_PREFIX)
    if not sep:
        return None
    try:
        value = json.loads(rest)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


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
        writes_events: bool = True,
        names_faults: bool = True,
    ) -> None:
        self.kube = Kube(kubeconfig_path)
        # Kubernetes Events from ClusterD (InitSuccess, FaultDetected, StrategyChosen, the outcomes):
        # real ClusterD writes none, component/clusterd has no event recorder (it only lists Events,
        # pkg/interface/kube/kube_client.go:198-213). On by default for the timeline's narrative;
        # off (``writes_events=False``, SIM_CLUSTERD_EVENTS=0) the cluster is as strict as a real one.
        self.writes_events = writes_events
        # Whether a fault signal names the injected fault in its device's ``faultReason``: real
        # ClusterD leaves it empty (component/clusterd/pkg/application/faultmanager/
        # faultclusterprocess/cluster_fault_processor.go:234, ``FaultReason: nil``). SimCluster
        # decides it (``clusterd_fault_ids``: by default as the Events).
        self.names_faults = names_faults
        self.clock = clock
        self.operator = operator
        self.taskd = taskd
        self.hub = Hub()
        self.rng = random.Random(seed)
        self.spare_resources = spare_resources
        # After a scale-in success, whether the fault pods' replacements come up later (capacity back):
        # ClusterD then sends the scale-out (controller.go:1978-2019). Off: the job stays scaled in.
        self.regrow_after_scale_in = False
        self.confirm_refusals = 0  # times ProcessConfirmFault could not be written (not cleared)
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self._idle = threading.Condition(self._lock)
        self._busy = 0
        self._queues: dict[str, queue.Queue[list[FaultSpec]]] = {}
        self._workers: dict[str, threading.Thread] = {}
        self._running: dict[str, _FaultRun] = {}  # job uid → the recovery in progress (merges new faults)
        self.merged = 0  # faults merged into a running recovery
        self._faults: dict[str, list[ActiveFault]] = {}  # job uid → active faults
        self.jobs: dict[str, JobRecord] = {}  # job uid → record
        self._reschedules: dict[str, int] = {}  # job uid → reschedules done
        self._informer: Informer | None = None
        self._pg_informer: Informer | None = None
        self._inits: dict[str, InitRecord] = {}  # job uid → what its Init read (the snapshot)
        # job uid → the faults of the scale-in it still runs without: ClusterD stays in
        # ScaleInRunningState until a scale-out or the PodGroup goes (controller.go:1973-1996).
        self._scaled_in: dict[str, tuple[RankFault, ...]] = {}
        self.history: list[tuple[str, list[Step]]] = []  # (fault id, steps) for tests and what-if

    # --- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        self.kube.ensure_namespace(VOLCANO_NAMESPACE)
        self._informer = Informer("clusterd-jobs", self.kube.list_jobs, self._on_job, self._stop)
        self._informer.start()
        self._pg_informer = Informer(
            "clusterd-podgroups", self.kube.list_podgroups, self._on_podgroup, self._stop
        )
        self._pg_informer.start()
        self._informer.synced.wait(10)
        self._pg_informer.synced.wait(10)

    def request_stop(self) -> None:
        """Ask the informer and workers to stop without waiting."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        for informer in (self._informer, self._pg_informer):
            if informer:
                informer.join(timeout=5)
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
                self._scaled_in.pop(uid, None)
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
            self._idle.notify_all()
        if changed:
            self.hub.publish(TOPIC_JOB, self.summary(record, "add"))
        if status == "running":
            self.taskd.start_manager(job)
            if changed:
                # The agent calls Init when the training processes start (and again on every restart);
                # only the first successful one reads the config.
                self.init_job(uid)

    def _on_podgroup(self, event_type: str, podgroup: dict[str, Any]) -> None:
        """DeleteJob on PodGroup deletion: the snapshot goes, the next Init reads again.

        A change to the PodGroup of a job whose Init was refused: TaskD's manager calls Init again
        1 s after every failure, endlessly (taskd/go/framework_backend/manager/manager.go:468-523), and a
        refused Init records nothing (fault_recover_service.go:579-585), so the next Init reads the
        changed PodGroup. Watching the PodGroup stands for that 1 s loop without polling."""
        owner: dict[str, Any] = next(iter(podgroup.get("metadata", {}).get("ownerReferences") or []), {})
        uid = str(owner.get("uid") or "")
        if event_type != "DELETED":
            with self._lock:
                record = self._inits.get(uid)
                job = self.jobs.get(uid)
            if record is not None and not record.accepted and job is not None and job.status == "running":
                threading.Thread(target=self._retry_init, args=(uid,), daemon=True).start()
            return
        with self._lock:
            record = self._inits.get(uid)
            if record is not None and record.podgroup_uid in ("", podgroup["metadata"].get("uid")):
                self._inits.pop(uid, None)

    # --- Init: the recovery-config snapshot ---------------------------------------------------------
    def init_job(self, uid: str) -> tuple[int, str]:
        """``Recover/Init`` for job ``uid``: (code, info), like fault_recover_service.go:570-592.

        The first accepted Init snapshots the PodGroup's recovery config; later calls return OK without
        reading. A refused Init (403, process-recover-enable not on and no hotSwitch) stores nothing
        that sticks: the next Init reads the PodGroup again."""
        with self._lock:
            current = self._inits.get(uid)
            record = self.jobs.get(uid)
        if current is not None and current.accepted:
            return engine.CODE_OK, f"job(uid={uid}) init success"
        if record is None:
            return 402, f"job {uid!r} does not exist"
        podgroup = self.kube.get_podgroup(record.namespace, f"{record.name}-{uid}")
        if podgroup is None:
            return 502, f"job(uid={uid}) has no PodGroup"
        meta = podgroup["metadata"]
        policy = RecoveryPolicy.from_podgroup(meta.get("labels") or {}, meta.get("annotations") or {})
        code = engine.CODE_OK if policy.init_accepted else engine.CODE_PROCESS_RECOVER_ENABLE_OFF
        new = InitRecord(code, policy, meta.get("uid", ""))
        with self._lock:
            current = self._inits.get(uid)
            if current is not None and current.accepted:  # another caller won the race
                return engine.CODE_OK, f"job(uid={uid}) init success"
            self._inits[uid] = new
            self._idle.notify_all()
        changed = current is None or (current.code, current.policy) != (new.code, new.policy)
        if changed and self.writes_events:
            self.kube.event(
                podgroup,
                EVENT_INIT if new.accepted else EVENT_INIT_REFUSED,
                init_event_message(uid, new),
                type_="Normal" if new.accepted else "Warning",
                component=COMPONENT,
            )
        if new.accepted:
            return engine.CODE_OK, f"job(uid={uid}) init success"
        return code, (
            f"job(uid={uid}) process-recover-enable and subhealthy hotswitch not open "
            f"(ProcessRecoverEnableOff)"
        )

    def _retry_init(self, uid: str) -> None:
        if self.clock.sleep(INIT_RETRY_S, self._stop):
            self.init_job(uid)

    def ignore_sub_health(self, uid: str) -> None:
        """A failed hotSwitch turns the snapshot's subHealthyStrategy to ignore (and HotSwitch off)
        until the PodGroup goes (hot_switch_controller.go:217-225; fault_recover_service.go:358-359)."""
        with self._lock:
            record = self._inits.get(uid)
            if record is not None and record.accepted:
                policy = dataclasses.replace(record.policy, hot_switch_off=True)
                self._inits[uid] = dataclasses.replace(record, policy=policy)

    def init_record(self, uid: str) -> InitRecord | None:
        """What the job's last Init read (accepted or refused), or None if no Init happened."""
        with self._lock:
            return self._inits.get(uid)

    def init_snapshot(self, uid: str) -> RecoveryPolicy | None:
        """The recovery config ClusterD snapshotted at the job's first accepted Init, if any."""
        record = self.init_record(uid)
        return record.policy if record is not None and record.accepted else None

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
    def inject(self, spec: FaultSpec, *more: FaultSpec) -> str:
        """Queue one fault event (``spec`` plus ``more`` faults of the same job, flushed together) for
        its job's recovery worker; raises ``UnknownJobError`` for unknown jobs/ranks."""
        job = self.kube.get_job(spec.namespace, spec.job)
        if job is None:
            raise UnknownJobError(f"job {spec.namespace}/{spec.job} not found")
        slots = pod_slots(job)
        for item in (spec, *more):
            if (item.namespace, item.job) != (spec.namespace, spec.job):
                raise UnknownJobError("all faults of one event must belong to the same job")
            if item.rank >= len(slots):
                raise UnknownJobError(
                    f"job {spec.namespace}/{spec.job} has no pod rank {item.rank} (it has {len(slots)} pods)"
                )
        uid = job["metadata"]["uid"]
        with self._lock:
            running = self._running.get(uid)
        if running is not None and running.merge([spec, *more]):
            return spec.id
        with self._lock:
            self._busy += 1
            work = self._queues.setdefault(uid, queue.Queue())
            work.put([spec, *more])
            worker = self._workers.get(uid)
            if worker is None or not worker.is_alive():
                worker = threading.Thread(
                    target=self._work, args=(uid,), name=f"clusterd-{spec.job}", daemon=True
                )
                self._workers[uid] = worker
                worker.start()
        return spec.id

    def wait_running(self, namespace: str, names: list[str], timeout: float) -> bool:
        """Block until every job ``namespace/name`` of ``names`` runs and its Init was accepted."""
        wanted = set(names)

        def ready() -> bool:
            done = {
                r.name
                for uid, r in self.jobs.items()
                if r.namespace == namespace
                and r.status == "running"
                and (init := self._inits.get(uid)) is not None
                and init.accepted
            }
            return wanted <= done

        with self._idle:
            return self._idle.wait_for(ready, timeout)

    def wait_idle(self, timeout: float) -> bool:
        """Block until no recovery is queued or running; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._busy, timeout)

    def _work(self, uid: str) -> None:
        work = self._queues[uid]
        while not self._stop.is_set():
            try:
                specs = work.get(timeout=0.2)
            except queue.Empty:
                with self._lock:
                    if work.empty():
                        self._workers.pop(uid, None)
                        return
                continue
            try:
                self.handle_fault(*specs)
            except Exception:
                log.exception("ClusterD failed to handle %s", [s.id for s in specs])
            finally:
                with self._idle:
                    self._busy -= 1
                    self._idle.notify_all()

    # --- one fault event ----------------------------------------------------------------------------
    def handle_fault(self, spec: FaultSpec, *more: FaultSpec) -> list[Step]:
        """Run the whole flow for one fault event (one or more faults of one job); returns the steps."""
        job = self.kube.get_job(spec.namespace, spec.job)
        if job is None:
            return []
        run = _FaultRun(self, job, [spec, *more])
        return run.execute()

    def restart_budget(self, job: Mapping[str, Any]) -> int | None:
        """Reschedules left: the operator's limit and the ``fault-retry-times`` remain count.

        The operator reads ``backoffLimit`` (else ``fault-retry-times``) once, in its create handler
        (component/ascend-operator/pkg/controllers/v1/ascendjob_controller.go:361-386) and checks pod
        versions against that record (job.go:79-80), so a later patch of the AscendJob changes nothing.
        """
        uid = job["metadata"]["uid"]
        limits: list[int] = []
        backoff = backoff_limit_at_creation(uid)
        if backoff is None:  # the operator has not seen the job: fall back to what the job says
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

    def __init__(self, clusterd: ClusterD, job: dict[str, Any], specs: list[FaultSpec]) -> None:
        self.cd = clusterd
        self.kube = clusterd.kube
        self.clock = clusterd.clock
        self.job = job
        self.specs = specs
        self.spec = specs[0]  # the event's id, outcome and kind come from the first fault
        meta = job["metadata"]
        self.namespace = meta.get("namespace", "default")
        self.name = meta["name"]
        self.uid = meta["uid"]
        self.pg_name = podgroup_name(job)
        self.reset_state: dict[str, Any] = {}
        self.active: ActiveFault | None = None
        self.actives: list[ActiveFault] = []
        self.per_pod = 1
        self.closed = False  # the recovery has ended: a new fault starts its own
        self.scaled_in: tuple[RankFault, ...] = ()  # the scale-in's faults, still in ClusterD's cache
        self.hot_switch_pod = ""  # the fault pod a hot switch is moving off

    # --- helpers ------------------------------------------------------------------------------------
    def event(self, reason: str, message: str, warning: bool = False) -> None:
        if not self.cd.writes_events:
            return
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

    def write_reset(self, operation: str, *, restart_fault_process: bool = False) -> None:
        """One ClusterD write of reset.json: setNewTaskInfo's fresh document for ``operation``
        (component/clusterd/pkg/domain/common/utils.go:231-269; source facts D12), with its check code
        (MakeDataHash, util.go:49-71; WriteResetInfoToCM, utils.go:215-227). Only ``fault`` writes ranks,
        as Status ``fault`` with no code or policy: codes and levels travel in the fault.Fault stream.
        A hot-reset rank left in the document refuses the write, and ClusterD logs and goes on."""
        ranks = (
            [*(f.rank for f in self.scaled_in), *(a.rank_fault.rank for a in self.actives)]
            if operation == reset_json.OP_FAULT
            else []
        )
        try:
            doc = reset_json.set_new_task_info(
                self.reset_state,
                operation,
                fault_ranks=sorted(set(ranks)),
                restart_fault_process=restart_fault_process,
                now=int(self.clock.now().timestamp()),
            )
        except reset_json.ResetWriteRefused as exc:
            self.event("ResetConfigRefused", f"{operation}: {exc}", warning=True)
            return
        self.reset_state = doc
        self.kube.upsert_configmap(
            self.namespace, reset_json.configmap_name(self.name), reset_json.configmap_data(doc)
        )

    def global_fault_list(
        self, inputs: EngineInput, *, reflush: bool = False, announce: bool = False
    ) -> None:
        """reset.json at globalFault: the fault list with ``RestartFaultProcess`` as ClusterD computes it,
        or no write (``engine.global_fault_restart_fault_process``). ``announce``: a GlobalFault Event
        says which, for readers of the simulated cluster."""
        value = engine.global_fault_restart_fault_process(inputs, reflush=reflush)
        if value is not None:
            self.write_reset(reset_json.OP_FAULT, restart_fault_process=value)
        if announce:
            what = (
                f"fault list written, RestartFaultProcess={'true' if value else 'false'}"
                if value is not None
                else "no fault list written"
            )
            self.event(
                "GlobalFault", f"{what} ({engine.SRC['global-fault']}, {engine.SRC['global-fault-list']})"
            )

    def signal(
        self,
        signal_type: str,
        actions: list[str] | tuple[str, ...],
        change_strategy: str = "",
        timeout: int = 0,
        extra_params: str = "",
        retry_only: bool = False,
    ) -> None:
        ranks = self.fault_ranks(retry_only)
        message = {
            "uuid": str(uuid.uuid4()),
            "jobId": self.uid,
            "signalType": signal_type,
            "actions": list(actions),
            "faultRanks": ranks,
            "changeStrategy": change_strategy,
            "timeout": timeout,
            "nodeRankIds": [str(r) for r in sorted({f.rank_fault.pod_rank for f in self.actives})],
            "extraParams": extra_params,
        }
        self.cd.hub.publish(topic_process(self.uid), message)

    def fault_ranks(self, retry_only: bool = False) -> list[dict[str, str]]:
        """FaultRank list of a signal: retry-type faults alone go out as they are (controller.go:870-886);
        otherwise every rank of every faulty pod, typed NormalFaultType "1" (controller.go:903-925)."""
        faults = [f.rank_fault for f in self.actives]
        if retry_only or all(f.fault_type in engine.RETRY_FAULT_TYPES and not f.node_fault for f in faults):
            return [{"rankId": str(f.rank), "faultType": f.fault_type} for f in faults]
        pods = sorted({f.pod_rank for f in faults})
        return [
            {"rankId": str(pod * self.per_pod + i), "faultType": vocab.FAULT_OTHER}
            for pod in pods
            for i in range(self.per_pod)
        ]

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
    def rank_fault(self, spec: FaultSpec, pods: list[dict[str, Any]]) -> ActiveFault:
        pod = next(
            (
                p
                for p in pods
                if p["metadata"].get("annotations", {}).get(ANNOTATION_RANK_INDEX) == str(spec.rank)
            ),
            None,
        )
        node = (pod or {}).get("spec", {}).get("nodeName", "")
        slot = pod_slots(self.job)[spec.rank]
        per_pod = max(1, npus_per_pod(self.job, slot.role))
        self.per_pod = per_pod
        rank_fault = RankFault(
            rank=spec.rank * per_pod + min(spec.device, per_pod - 1),
            pod_rank=spec.rank,
            node=node,
            fault_type=spec.fault_type,
            level=spec.effective_level,
            code=spec.effective_code,
            node_fault=spec.node_fault,
        )
        return ActiveFault(spec, self.uid, node, (pod or {}).get("status", {}).get("hostIP", ""), rank_fault)

    def execute(self) -> list[Step]:
        pods = self.kube.list_job_pods(self.namespace, self.name)
        self.actives = [self.rank_fault(spec, pods) for spec in self.specs]
        self.active = self.actives[0]
        rank_faults = tuple(f.rank_fault for f in self.actives)
        with self.cd._lock:
            current = list(self.cd._faults.get(self.uid, []))
        self.cd._set_faults(self.uid, [*current, *self.actives])
        self.report(self.actives)
        with self.cd._lock:
            self.cd._running[self.uid] = self  # from now on a new fault of this job is merged
        try:
            return self._recover(rank_faults)
        finally:
            with self.cd._lock:
                self.closed = True
                if self.cd._running.get(self.uid) is self:
                    del self.cd._running[self.uid]

    def report(self, actives: list[ActiveFault]) -> None:
        """A FaultDetected Event per fault, when it happens (the fault centre sees it at once)."""
        for active in actives:
            fault = active.rank_fault
            what = f"{active.spec.kind} fault (code {fault.code or '-'}, level {fault.level or 'business'})"
            self.event(
                "FaultDetected",
                f"{what} on pod rank {active.spec.rank} (process rank {fault.rank}, "
                f"node {active.node}) [{active.spec.id}]",
                warning=True,
            )

    def merge(self, specs: list[FaultSpec]) -> bool:
        """A fault of this job while this recovery runs: reported at once and merged, not queued.

        ``notifyFaultInfoForJob`` saves it in the running controller's fault cache
        (``fault_recover_service.go:165``, ``saveCacheFault`` at ``controller.go:204-219``), which the
        recovery's later signals and reset.json writes read (``updateCacheFaultAndPod``,
        ``controller.go:986-990``); its FaultOccurEvent is dropped ("order mix") because only InitState
        and ScaleInRunningState take one (``controller.go:474-479``, ``rules.go:148, 322``); and it is not
        raised again while it lasts, since ``getAdditionFault`` only passes faults new since the last
        check (``fault_recover_service.go:233-258``). The reset at the end empties the cache
        (``controller.go:252, 287-288``). False when the recovery has already ended (then it is queued).
        """
        pods = self.kube.list_job_pods(self.namespace, self.name)
        new = [self.rank_fault(spec, pods) for spec in specs]
        with self.cd._lock:
            if self.closed:
                return False
            sub_healthy_run = all(a.rank_fault.level in engine.SUB_HEALTHY_LEVELS for a in self.actives)
        if not sub_healthy_run and all(f.rank_fault.level in engine.SUB_HEALTHY_LEVELS for f in new):
            # The job is UnHealthy while this recovery runs: SubHealthFault entries are dropped
            # (fault_recover_service.go:302-304), and hotSwitch only starts from InitState (:362-367).
            self.report(new)
            ids = ", ".join(spec.id for spec in specs)
            self.event("FaultIgnored", f"sub-health fault {ids} during the recovery of {self.spec.id}")
            return True
        with self.cd._lock:
            if self.closed:
                return False
            self.specs.extend(specs)
            self.actives.extend(new)
            current = list(self.cd._faults.get(self.uid, []))
            self.cd.merged += len(new)
        self.cd._set_faults(self.uid, [*current, *new])
        self.report(new)
        ids = ", ".join(spec.id for spec in specs)
        self.event("FaultMerged", f"fault {ids} joins the recovery in progress of {self.spec.id}")
        return True

    def _recover(self, rank_faults: tuple[RankFault, ...]) -> list[Step]:
        policy = self.snapshot_policy()
        with self.cd._lock:
            # A fault while the job runs scaled in leaves ScaleInRunningState (rules.go:322-323).
            scaled_in = self.cd._scaled_in.pop(self.uid, ())
        self.scaled_in = scaled_in
        labels = (self.job.get("metadata") or {}).get("labels") or {}
        pg_meta = (self.podgroup() or {}).get("metadata") or {}
        base = EngineInput(
            policy=policy,
            supported=frozenset(),
            faults=rank_faults,
            spare_resources=self.cd.spare_resources,
            scale_out=self.cd.regrow_after_scale_in,
            restart_budget=self.cd.restart_budget(self.job),
            framework=labels.get(k.LABEL_FRAMEWORK, "pytorch"),
            release=_release(labels),
            # Read live at the fault: wait-reschedule-timeout (controller.go:1668-1679) and whether the
            # PodGroup still allows recover-in-place (pg_util.go:94-118).
            wait_reschedule_s=engine.parse_wait_reschedule_timeout(
                (pg_meta.get("annotations") or {}).get(k.ANNOTATION_WAIT_RESCHEDULE_TIMEOUT)
            ),
            live_in_place=engine.live_in_place_allowed(
                pg_meta.get("labels") or {}, pg_meta.get("annotations") or {}
            ),
            scaled_in=scaled_in,
        )
        admission = engine.admit(base) if policy.init_accepted else None
        kind = admission.kind if admission is not None else "refused"
        if kind in ("ignore", "hot-switch"):
            # Skipped faults and the hotSwitch machine never touch reset.json's flushing, stopTrain or
            # the platform handshake (fault_recover_service.go:151-174). hotSwitch's pause result is
            # the agent's strategy report (hot_switch_controller.go:151-179).
            if kind == "hot-switch":
                base = replace(base, supported=frozenset(self.cd.taskd.agent_report(self.job)[0]))
            steps = engine.plan(base, self.outcome)
            return self._execute(steps, base)
        supported: frozenset[str] = frozenset()
        platform_choice: str | None = None
        timed_out = False
        table_ready = True
        standing: str | None = None
        strategy_reported = True
        if admission is not None:
            if kind == "pre-exit":
                # v26: preExitProcess to the fault pods first; TaskD stops their workers and reports
                # them with ReportProcessFault (fault_recover_service.go:181-187, 199-231, 788-791).
                self.signal("preExitProcess", ["pre_exit_process"])
                self.event("PreExitProcess", admission.reason)
            handshake = platform.start(self) if policy.platform_mode else None  # platform.py: the real order
            # The standing answer is awaited before anything is stopped (controller.go:664-674); a fault
            # while the job runs scaled in skips that handler: no wait, no dump-for-fault check, no
            # FaultFlushing write, straight to stopTrain (rules.go:322-323, controller.go:703-714).
            if scaled_in or handshake is None or handshake.wait_standing():
                standing = handshake.standing if handshake is not None else None
                if not scaled_in and engine.dump_for_fault(
                    replace(admission.inputs, platform_standing=standing)
                ):
                    # DumpForFaultEvent: straight to saveAndExit with the fault list in reset.json; no
                    # FaultFlushing, stopTrain, globalFault, ProcessConfirmFault or strategy report
                    # (controller.go:676-681, 716-747; rules.go:155-156).
                    self.write_reset(reset_json.OP_FAULT)  # the fault list (controller.go:737-738)
                    inputs = replace(base, platform_choice=standing, platform_standing=standing)
                    steps = engine.plan(inputs, self.outcome)
                    return self._execute(steps, inputs)
                if not scaled_in:
                    # FaultOccur: notifyFaultFlushing, no ranks yet (controller.go:682-683).
                    self.write_reset(reset_json.OP_FAULT_FLUSHING)
                self.signal("stopTrain", ["stop_train"], timeout=900)
                script = self.cd.taskd.script_for(self.uid)
                stop_report = script.stop_report if script is not None else engine.CODE_OK
                strategy_reported = script.strategy_reported if script is not None else True
                if stop_report in (engine.NO_REPORT, engine.CODE_PROCESS_NOT_READY):
                    # No ReportStopComplete, or code 404: ClusterD never reaches globalFault or the
                    # platform's ProcessConfirmFault (rules.go:172-175); the plan says what follows.
                    inputs = replace(
                        base, platform_choice=standing, platform_standing=standing, stop_report=stop_report
                    )
                    return self._execute(engine.plan(inputs, self.outcome), inputs)
                self.sleep(engine.PHASE_SECONDS["detect"])
                # The cache by now holds any fault merged since (getAllFaultRanks, controller.go:986-990).
                with self.cd._lock:
                    rank_faults = tuple(f.rank_fault for f in self.actives)
                faults = platform.confirm_faults(rank_faults, self.per_pod)
                if handshake is None or handshake.confirm(faults):  # before the globalFault signal
                    if release_at_least(base.release, "26.0") and not all(
                        f.fault_type in engine.RETRY_FAULT_TYPES for f in rank_faults
                    ):
                        # Normal faults: v26 always sleeps NotReleaseSleepTime (10 s) before the
                        # fault list goes out (controller.go:1018-1022; constants.go:283-287; facts D13).
                        self.sleep(NOT_RELEASE_SLEEP_S)
                    # globalFault: the fault list first, with RestartFaultProcess, or none at all
                    # (retry faults; v7.x with in-place possible) (controller.go:870-886, 960-966; D13).
                    self.global_fault_list(
                        replace(base, faults=rank_faults, platform_standing=standing), announce=True
                    )
                    self.signal("globalFault", ["on_global_rank"])
                    support, reasons = self.cd.taskd.agent_report(self.job)
                    supported = frozenset(support) if strategy_reported else frozenset()
                    if reasons and strategy_reported:
                        self.event(
                            "TaskDStrategies",
                            f"TaskD reports {sorted(supported) or 'nothing'}; " + "; ".join(reasons),
                        )
            if handshake is not None:
                platform_choice, timed_out = handshake.choice, handshake.timed_out
                if not timed_out and platform_choice == "recover" and "recover" in policy.configured:
                    # WaitRankTableReady gates a recover; on failure the answer is re-read
                    # (controller.go:1219-1231).
                    table_ready = handshake.rank_table_ready()
                    platform_choice = handshake.choice
        inputs = replace(
            base,
            faults=rank_faults,
            supported=supported,
            platform_choice=platform_choice,
            platform_timed_out=timed_out,
            rank_table_ready=table_ready,
            strategy_reported=strategy_reported,
        )
        return self._execute(engine.plan(inputs, self.outcome), inputs)

    def _execute(self, steps: list[Step], inputs: EngineInput) -> list[Step]:
        with self.cd._lock:
            self.cd.history.append((self.spec.id, steps))
        for step in steps:
            if self.cd._stop.is_set():
                break
            self.run_step(step, inputs)
        return steps

    def snapshot_policy(self) -> RecoveryPolicy:
        """The Init snapshot; if the agent's Init has not reached ClusterD yet, it happens now. A refused
        Init is retried by TaskD every second (td/manager.go:468-523), so one is retried here too."""
        record = self.cd.init_record(self.uid)
        if record is None or not record.accepted:
            self.cd.init_job(self.uid)
            record = self.cd.init_record(self.uid)
        if record is not None:
            return record.policy
        # No job record or PodGroup: nothing was initialised, so only Volcano acts on the fault.
        return RecoveryPolicy(process_recover_enable="")

    def outcome(self, strategy: str, attempt: int) -> bool | int:
        """What the agent reports for this attempt: a scripted agent's answer, else the fault's."""
        scripted = self.cd.taskd.scripted_result(self.uid, strategy, attempt)
        if scripted is not None:
            return scripted
        if strategy == "dump" and "dump" not in self.cd.taskd.supported_strategies(self.job)[0]:
            # Dump-for-fault sends saveAndExit without asking the agent (controller.go:676-681); a
            # TaskD that cannot dump (e.g. no TTP port) saves nothing, so the dump fails.
            return False
        return self.spec.outcome(attempt, self.cd.rng)

    def run_step(self, step: Step, inputs: EngineInput) -> None:
        kind = step.kind
        if kind in (StepKind.PLATFORM_TIMEOUT, StepKind.PRE_EXIT):
            return  # already done before the plan: the handshake's event, the preExitProcess signal
        if kind in _HOT_SWITCH_KINDS:
            self.hot_switch_step(step, inputs)
            return
        if kind == StepKind.FAULT_NODES_EXIT:
            self.signal("faultNodesExit", step.actions or ["fault_nodes_exit"])
            self.event("FaultNodesExit", step.reason)
            return
        if kind == StepKind.IGNORED:
            self.event("FaultIgnored", step.reason)
            self.finish()
            return
        if kind == StepKind.RESCHEDULE_WAIT:
            # listenScheduleResult reads wait-reschedule-timeout live (controller.go:1668-1679).
            annotations = ((self.podgroup() or {}).get("metadata") or {}).get("annotations") or {}
            wait_s = engine.parse_wait_reschedule_timeout(
                annotations.get(k.ANNOTATION_WAIT_RESCHEDULE_TIMEOUT)
            )
            self.sleep(float(wait_s))
            self.event("ScheduleTimeout", f"waited {wait_s} s: {step.reason}", warning=True)
            return
        if kind == StepKind.REPORT_TIMEOUT:
            # The agent stays silent: ClusterD's wait runs its full 15 minutes on the simulated clock
            # (reportTimeoutMinutes, controller.go:36) before ReportTimeoutEvent (code 507).
            self.sleep(step.duration_s)
            self.event("ReportTimeout", f"{step.strategy or 'no strategy'}: {step.reason}", warning=True)
            return
        if kind == StepKind.RESTART_PODS:
            # v26 in-place: these pods' faults did not clear within 15 s, so they exit and are
            # recreated while the other fault pods restart in place (controller.go:1026-1030, 2154-2163).
            self.sleep(step.duration_s)
            self.migrate(step.pod_ranks)
            self.event("PodsRestarted", f"pods {list(step.pod_ranks)}: {step.reason}")
            return
        if kind == StepKind.SCALE_OUT_WAIT:
            # waitScaleOut's 5 s poll sees the PodGroup running with the fault pods replaced
            # (checkWhetherPodChanged, controller.go:1978-1996, 2050-2068).
            self.sleep(step.duration_s)
            self.migrate(step.pod_ranks)
            self.event("ScaleOutReady", step.reason)
            return
        if kind == StepKind.PROCESS_NOT_READY:
            self.event("ProcessNotReady", f"code {step.code}: {step.reason}", warning=True)
            return
        if kind == StepKind.CHOOSE:
            self.event("StrategyChosen", f"{step.strategy}: {step.reason}")
        elif kind == StepKind.ATTEMPT:
            self.attempt(step)
        elif kind == StepKind.RANK_TABLE_NOT_READY:
            self.event("WaitRankTableReadyFailed", step.reason, warning=True)
        elif kind in (StepKind.SUCCEEDED, StepKind.FAILED):
            if step.recover_status:
                self.patch_podgroup(annotations={k.ANNOTATION_RECOVER_STATUS: step.recover_status})
            status = step.recover_status or "no ProcessRecoverStatus"
            # No reset.json write for a result: ClusterD has no per-rank status operation (const.go:124-130).
            if kind == StepKind.SUCCEEDED:
                self.event("RecoverSucceeded", f"{step.strategy} succeeded ({status})")
            else:
                self.event(
                    "RecoverFailed", f"{step.strategy} failed ({status}, code {step.code})", warning=True
                )
        elif kind == StepKind.REFLUSH:
            # The fault list again, the retry faults now normal ones (controller.go:840-861, 960-966).
            self.global_fault_list(inputs, reflush=True)
            self.signal("globalFault", ["on_global_rank"])
        elif kind == StepKind.EXIT:
            self.signal("changeStrategy", step.actions or ["change_strategy"], change_strategy="exit")
            self.sleep(step.duration_s)
            if step.recover_status:
                self.patch_podgroup(annotations={k.ANNOTATION_RECOVER_STATUS: step.recover_status})
            self.event("ProcessExited", "training processes stopped (no status written); " + step.reason)
        elif kind == StepKind.DUMP_EXIT:
            self.signal(
                "changeStrategy",
                step.actions or ["change_strategy"],
                change_strategy="exit",
                extra_params=step.extra_params,
            )
            self.sleep(step.duration_s)
            self.event("ProcessExited", "training processes stopped (dump-exit); " + step.reason)
        elif kind == StepKind.LISTEN_SCHEDULE:
            self.sleep(step.duration_s)
            self.event("ScheduleTimeout", step.reason)
        elif kind == StepKind.RESTART_ALL_PROCESS:
            # restartAllProcess adds 1 to RetryTime (controller.go:1829-1831; utils.go:231-269, facts D12).
            self.write_reset(reset_json.OP_RESTART_ALL_PROCESS)
            self.event("RestartAllProcess", step.reason)
        elif kind == StepKind.FAULT_CLEAR:
            self.write_reset(reset_json.OP_CLEAR)  # handleFaultClear (controller.go:692-694)
            self.event("FaultClear", step.reason)
        elif kind == StepKind.KILL_MASTER:
            self.sleep(step.duration_s)
            self.signal("killMaster", [])
            self.event("KillMaster", step.reason, warning=True)
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
            self.finish(scaled_in=inputs.faults if step.strategy == "elastic-training" else None)

    def attempt(self, step: Step) -> None:
        assert step.strategy is not None
        if step.strategy == engine.SCALE_OUT:
            # waitScaleOut only sends the signal; reset.json is not touched (controller.go:1998-2017).
            self.signal(
                step.signal or "changeStrategy",
                step.actions or ["change_strategy"],
                change_strategy=step.change_strategy or "",
                extra_params=step.extra_params,
            )
            self.sleep(step.duration_s)
            return
        if step.strategy == "recover-in-place":
            # handleRestartFaultProcess: the fault list with RestartFaultProcess (controller.go:1296-1301).
            self.write_reset(reset_json.OP_FAULT, restart_fault_process=True)
        self.signal(
            step.signal or "changeStrategy",
            step.actions or ["change_strategy"],
            change_strategy=step.change_strategy or "",
            extra_params=step.extra_params,
            retry_only=step.strategy == "retry",
        )
        if step.strategy == "recover" and step.pod_ranks and self.cd.spare_resources:
            # Without a free node the new pods never run: listenScheduleResult times out (D7).
            self.migrate(step.pod_ranks)
        self.sleep(step.duration_s)

    def rank_pod(self, rank: int) -> str:
        """The pod that holds process rank ``rank`` now: after a hot switch it is the backup pod
        ``<pod>-hot-NNNN``, so look it up by its rank index, not by the slot's name; a backup pod still
        waiting to take over (podType=backup) does not hold it yet."""
        for pod in self.kube.list_job_pods(self.namespace, self.name):
            annotations = pod["metadata"].get("annotations") or {}
            if annotations.get(ANNOTATION_RANK_INDEX) == str(rank) and (
                annotations.get(ANNOTATION_POD_TYPE) != POD_TYPE_BACKUP
            ):
                return str(pod["metadata"]["name"])
        return next(s.pod_name(self.name) for s in pod_slots(self.job) if s.rank == rank)

    def hot_switch_step(self, step: Step, inputs: EngineInput) -> None:
        """The hotSwitch machine's pod operations (hot_switch_controller.go:20-275) and what the operator
        and Volcano do with them: the operator creates the backup pod ``<pod>-hot-NNNN`` for a pod
        annotated needOperatorOpe=create (pod.go:474-525), Volcano deletes a pod annotated
        needVolcanoOpe=delete unless fault-scheduling is off (reschedule.go:108-114, task.go:57-72), the
        operator then hands the rank to the backup pod (ascendjob_controller.go:466-497), and a failed
        switch has the backup pod deleted (needOperatorOpe=delete, hot_switch_controller.go:217-257,
        ascendjob_controller.go:688-691)."""
        kind = step.kind
        if kind == StepKind.HOT_SWITCH:
            self.signal("hotSwitch", ["hot_switch"])
            for rank in step.pod_ranks:
                self.hot_switch_pod = self.rank_pod(rank)
                self.kube.patch_pod(
                    self.namespace,
                    self.hot_switch_pod,
                    {
                        "metadata": {
                            "annotations": {
                                ANNOTATION_IN_HOT_SWITCH_FLOW: "true",
                                ANNOTATION_NEED_OPERATOR_OPE: OPE_CREATE,
                            }
                        }
                    },
                )
                # Without a free node the backup pod stays Pending (the engine's stop-switch path).
                self.cd.operator.on_pod_annotated(
                    self.job, self.hot_switch_pod, schedulable=self.cd.spare_resources
                )
            self.event("HotSwitch", step.reason)
        elif kind == StepKind.HOT_SWITCH_STOP:
            self.sleep(step.duration_s)
            self.signal("hotSwitch", ["stop_switch"])
            self.event("HotSwitchStopped", step.reason, warning=True)
        elif kind == StepKind.HOT_SWITCH_NEW_POD:
            self.signal("hotSwitch", ["new_pod_running"])
            self.event("HotSwitchNewPodRunning", step.reason)
        elif kind in (StepKind.DELETE_OLD_POD, StepKind.STOP_JOB):
            target = self.hot_switch_pod if kind == StepKind.DELETE_OLD_POD else self.rank_pod(0)
            self.kube.patch_pod(
                self.namespace,
                target,
                {
                    "metadata": {
                        "annotations": {ANNOTATION_NEED_VOLCANO_OPE: OPE_DELETE},
                        "labels": {"fault-type": "SubHealth"},
                    }
                },
            )
            if kind == StepKind.DELETE_OLD_POD and inputs.policy.job_rescheduling:
                # Volcano deletes the old pod (OldPodDeletedEvent, fault_recover_service.go:106-118) and the
                # operator hands its rank to the backup pod. With fault-scheduling off nothing happens.
                old = self.kube.get_pod(self.namespace, target)
                self.kube.delete_pod(self.namespace, target)
                self.cd.operator.nodes.release(f"{self.namespace}/{target}")
                if old is not None:
                    self.cd.operator.on_pod_deleted(self.job, old)
            self.event("HotSwitchDeletePod", step.reason)
        elif kind == StepKind.HOT_SWITCH_STUCK:
            self.event("HotSwitchStuck", step.reason, warning=True)
        elif kind == StepKind.SUB_HEALTH_IGNORE:
            self.clean_hot_switch()
            self.cd.ignore_sub_health(self.uid)
            self.event("SubHealthyStrategyIgnore", step.reason, warning=True)

    def clean_hot_switch(self) -> None:
        """cleanStateWhenFailed (hot_switch_controller.go:217-257): the fault pod, if it still exists and
        is in the flow, loses inHotSwitchFlow, backupNewPodName and needOperatorOpe; its backup pod is
        annotated needOperatorOpe=delete, which the operator deletes (ascendjob_controller.go:688-691)."""
        if not self.hot_switch_pod:
            return
        pod = self.kube.get_pod(self.namespace, self.hot_switch_pod)
        annotations = (pod or {}).get("metadata", {}).get("annotations") or {}
        if ANNOTATION_IN_HOT_SWITCH_FLOW not in annotations:
            return
        self.kube.patch_pod(
            self.namespace,
            self.hot_switch_pod,
            {
                "metadata": {
                    "annotations": {
                        ANNOTATION_IN_HOT_SWITCH_FLOW: None,
                        ANNOTATION_BACKUP_NEW_POD_NAME: None,
                        ANNOTATION_NEED_OPERATOR_OPE: None,
                    }
                }
            },
        )
        backup = annotations.get(ANNOTATION_BACKUP_NEW_POD_NAME)
        if backup and self.kube.get_pod(self.namespace, backup) is not None:
            self.kube.patch_pod(
                self.namespace,
                backup,
                {"metadata": {"annotations": {ANNOTATION_NEED_OPERATOR_OPE: OPE_DELETE}}},
            )
            self.cd.operator.on_pod_annotated(self.job, backup)

    def migrate(self, pod_ranks: tuple[int, ...]) -> None:
        """recover: the faulty pods are deleted and started again on healthy nodes (same version)."""
        version = self.current_version()
        self.delete_rank_pods(set(pod_ranks))
        self.cd.operator.create_pods(self.job, version=version, only_ranks=set(pod_ranks))

    def delete_rank_pods(self, ranks: set[int]) -> None:
        """Delete every pod of these ranks, whatever its name (a hot switch's backup pod included)."""
        slot_names = {s.pod_name(self.name) for s in pod_slots(self.job)}
        for pod in self.kube.list_job_pods(self.namespace, self.name):
            meta = pod["metadata"]
            if int((meta.get("annotations") or {}).get(ANNOTATION_RANK_INDEX, -1)) in ranks:
                self.kube.delete_pod(self.namespace, meta["name"])
                if meta["name"] not in slot_names:  # the slot's own name is placed again when recreated
                    self.cd.operator.nodes.release(f"{self.namespace}/{meta['name']}")

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
        self.delete_rank_pods(ranks)
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

    def finish(self, scaled_in: tuple[RankFault, ...] | None = None) -> None:
        """The event is over. ``scaled_in``: the job runs on scaled in, ClusterD stays in
        ScaleInRunningState with its fault cache and results (no reset, controller.go:1973-1996), and
        the next fault of the job is handled from there (rules.go:322-323)."""
        with self.cd._lock:
            self.closed = True  # handleFinish → reset (controller.go:659-662): a later fault is its own
            if scaled_in is not None:
                self.cd._scaled_in[self.uid] = tuple(scaled_in)
        if scaled_in is None:
            self.write_reset(reset_json.OP_CLEAR)  # reset(): ClearOperation (controller.go:221-227)
        with self.cd._lock:
            remaining = [
                f for f in self.cd._faults.get(self.uid, []) if all(f is not a for a in self.actives)
            ]
        self.cd._set_faults(self.uid, remaining)


_HOT_SWITCH_KINDS: Final = frozenset(
    {
        StepKind.HOT_SWITCH,
        StepKind.HOT_SWITCH_STOP,
        StepKind.HOT_SWITCH_NEW_POD,
        StepKind.DELETE_OLD_POD,
        StepKind.STOP_JOB,
        StepKind.SUB_HEALTH_IGNORE,
        StepKind.HOT_SWITCH_STUCK,
    }
)


def _release(labels: Mapping[str, str]) -> str:
    """The job's declared MindCluster release; an unknown or missing one counts as the newest."""
    value = labels.get(k.LABEL_RELEASE, DEFAULT_RELEASE)
    return value if value in RELEASES else DEFAULT_RELEASE


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

"""ClusterD's gRPC surface (clusterd-wire.md): ``fault.Fault``, ``job.Job``, ``PubFault`` and ``Recover``.

Served with ``grpcio`` from messages generated out of ``mindcluster/wire/protos``; field names and
numbers follow the real protos, so a client built for a real ClusterD works against this one.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent import futures
from typing import Any, Final

import grpc

from mindcluster import faults as vocab
from mindcluster import keys as k
from mindcluster.clusterd import UNHEALTHY_LEVELS
from mindcluster.wire.grpc_gen import fault_pb2, job_pb2, pubfault_pb2, recover_pb2
from mindcluster.wire.grpc_gen.services import (
    fault_pb2_grpc,
    job_pb2_grpc,
    pubfault_pb2_grpc,
    recover_pb2_grpc,
)
from simcluster.clusterd.controller import TOPIC_FAULT, TOPIC_JOB, ActiveFault, ClusterD, topic_process
from simcluster.injector import FaultSpec, UnknownJobError
from simcluster.operator import ANNOTATION_RANK_INDEX, LABEL_JOB_NAME

log = logging.getLogger(__name__)

# Return codes (mindcluster.md §6.2).
OK: Final = 0
CODE_JOB_NOT_EXIST: Final = 402
CODE_PROCESS_RESCHEDULE_OFF: Final = 403
CODE_UNINIT: Final = 408
CODE_CLIENT_ERROR: Final = 499
QUERY_OK: Final = 200
QUERY_RATE_PER_S: Final = 10  # grpc_service.go:46-48: defaultTokenRate, defaultBurst, defaultMaxQueueLen
QUERY_BURST: Final = 10
QUERY_WAIT_QUEUE: Final = 50
RATE_LIMITED_MESSAGE: Final = "rate limited, there is too many requests, please retry later"
JOB_ROLES: Final = ("CCAgent", "DefaultUser1", "DefaultUser2", "FdAgent")
# PubFault faultType → the simulator's fault kind.
PUBLIC_FAULT_KINDS: Final = {"NPU": "normal", "Node": "node", "Network": "hccl", "Storage": "normal"}
_STREAM_POLL_S: Final = 0.25


def _fault_signal(job_uid: str, faults: list[ActiveFault], *, names_faults: bool) -> fault_pb2.FaultMsgSignal:
    """One FaultMsgSignal for a job: ``fault`` with its nodes and devices, or ``normal`` when healthy.

    Real ClusterD leaves each device's ``faultReason`` empty (component/clusterd/pkg/application/
    faultmanager/faultclusterprocess/cluster_fault_processor.go:234, ``FaultReason: nil``); with
    ``names_faults`` the simulator puts the injected fault's id there (``ClusterD.names_faults``).
    """
    if not faults:
        return fault_pb2.FaultMsgSignal(uuid=str(uuid.uuid4()), jobId=job_uid, signalType="normal")
    nodes: dict[str, fault_pb2.NodeFaultInfo] = {}
    for fault in faults:
        rank = fault.rank_fault
        node = nodes.get(fault.node)
        unhealthy = rank.node_fault or rank.level in UNHEALTHY_LEVELS
        if node is None:
            node = fault_pb2.NodeFaultInfo(
                nodeName=fault.node,
                nodeIP=fault.node_ip,
                nodeSN=f"SN-{fault.node}",
                faultLevel=vocab.UNHEALTHY if unhealthy else vocab.SUB_HEALTHY,
            )
            nodes[fault.node] = node
        elif unhealthy:
            node.faultLevel = vocab.UNHEALTHY
        node.faultDevice.append(
            fault_pb2.DeviceFaultInfo(
                deviceId="-1" if rank.node_fault else str(fault.spec.device),
                deviceType="Node" if rank.node_fault else ("Process" if rank.business_process else "NPU"),
                faultCodes=[rank.code] if rank.code else [],
                faultLevel=rank.level or "RestartBusiness",
                faultType=[fault.spec.kind],
                faultReason=[fault.spec.id] if names_faults else [],
                faultLevels=[rank.level or "RestartBusiness"],
            )
        )
    return fault_pb2.FaultMsgSignal(
        uuid=str(uuid.uuid4()), jobId=job_uid, signalType="fault", nodeFaultInfo=list(nodes.values())
    )


class _AdvancedRateLimiter:
    """ClusterD's query limiter (component/clusterd/pkg/common/util/advance_limiter.go:25-60, made
    at grpc_service.go:73 with rate 10/s, burst 10, wait queue 50): a token if one is there; else,
    unless 50 callers already wait, wait for one up to 50 / 10 = 5 s or the call's own deadline
    (golang.org/x/time/rate ``Wait`` refuses at once a wait longer than that); refused otherwise."""

    def __init__(self, rate: float, burst: int, max_wait_queue: int) -> None:
        self.rate = rate
        self.burst = burst
        self.max_wait_queue = max_wait_queue
        self._tokens = float(burst)
        self._at = time.monotonic()
        self._waiting = 0
        self._lock = threading.Lock()

    def _refill(self, now: float) -> None:
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate)
        self._at = now

    def allow(self, time_remaining: float | None) -> bool:
        with self._lock:
            self._refill(time.monotonic())
            if self._tokens >= 1:
                self._tokens -= 1
                return True
            if self._waiting >= self.max_wait_queue:
                return False
            self._waiting += 1
            upper = float(self.max_wait_queue // self.burst)
            limit = upper if time_remaining is None else min(upper, time_remaining)
            delay = (1 - self._tokens) / self.rate
            if delay > limit:
                self._waiting -= 1
                return False
            self._tokens -= 1  # reserved: the callers after this one wait longer
        time.sleep(delay)
        with self._lock:
            self._waiting -= 1
        return True


class FaultService:
    """``fault.Fault``: full state on subscribe, then changes only."""

    def __init__(self, clusterd: ClusterD, stop: threading.Event) -> None:
        self.cd = clusterd
        self.stop = stop
        self.limiter = _AdvancedRateLimiter(QUERY_RATE_PER_S, QUERY_BURST, QUERY_WAIT_QUEUE)

    def Register(self, request: Any, context: Any) -> Any:
        if request.jobId and not 8 <= len(request.jobId) <= 128:
            return fault_pb2.Status(code=CODE_CLIENT_ERROR, info="jobId must be empty or 8-128 characters")
        return fault_pb2.Status(code=OK, info="registered")

    def _snapshot(self, job_id: str) -> list[Any]:
        faults = self.cd.fault_snapshot()
        if job_id:
            return [self._signal(job_id, faults.get(job_id, []))]
        if not faults:
            return [self._signal("", [])]
        return [self._signal(uid, items) for uid, items in sorted(faults.items())]

    def _signal(self, job_uid: str, faults: list[ActiveFault]) -> fault_pb2.FaultMsgSignal:
        return _fault_signal(job_uid, faults, names_faults=self.cd.names_faults)

    def SubscribeFaultMsgSignal(self, request: Any, context: Any) -> Iterator[Any]:
        job_id = request.jobId
        sub = self.cd.hub.subscribe(
            TOPIC_FAULT, snapshot=lambda: [("snapshot", s) for s in self._snapshot(job_id)]
        )
        try:
            while context.is_active() and not self.stop.is_set():
                item = sub.get(_STREAM_POLL_S)
                if item is None:
                    continue
                if item[0] == "snapshot":
                    yield item[1]
                    continue
                uid, faults = item
                if job_id and uid != job_id:
                    continue
                yield self._signal(uid, faults)
        finally:
            sub.close()

    def GetFaultMsgSignal(self, request: Any, context: Any) -> Any:
        if not self.limiter.allow(context.time_remaining()):
            # grpc_service.go:188-194: the 429 result goes with an error, so grpc-go sends the
            # client an UNKNOWN status carrying the error's text, not the result.
            context.abort(grpc.StatusCode.UNKNOWN, RATE_LIMITED_MESSAGE)
        job_id = request.jobId
        faults = self.cd.fault_snapshot()
        if job_id:
            # component/clusterd/pkg/application/fault/grpc_service.go:199-214: an id outside 8-128
            # characters is refused (InvalidReqParam 409, returned with an error, so grpc-go sends
            # the client an UNKNOWN status and no body); a job without fault info is answered 200
            # with no signal.
            if not 8 <= len(job_id) <= 128:
                context.abort(grpc.StatusCode.UNKNOWN, f"job with jobId: {job_id} is invalid")
            if job_id not in faults:
                return fault_pb2.FaultQueryResult(
                    code=QUERY_OK, info=f"job with jobId: {job_id} not found fault info"
                )
            signal = self._signal(job_id, faults[job_id])
        else:
            signal = fault_pb2.FaultMsgSignal(
                uuid=str(uuid.uuid4()), signalType="fault" if faults else "normal"
            )
            for uid, items in sorted(faults.items()):
                signal.nodeFaultInfo.extend(self._signal(uid, items).nodeFaultInfo)
        return fault_pb2.FaultQueryResult(code=QUERY_OK, info="ok", faultSignal=signal)


class JobService:
    """``job.Job``: registration by role, then job summaries (current jobs first, then changes)."""

    def __init__(self, clusterd: ClusterD, stop: threading.Event) -> None:
        self.cd = clusterd
        self.stop = stop
        self._registered: set[str] = set()
        self._lock = threading.Lock()

    def Register(self, request: Any, context: Any) -> Any:
        if request.role not in JOB_ROLES:
            return job_pb2.Status(code=CODE_CLIENT_ERROR, info=f"role must be one of {list(JOB_ROLES)}")
        client_id = request.clientId or str(uuid.uuid4())
        with self._lock:
            self._registered.add(client_id)
        return job_pb2.Status(code=OK, info="registered", clientId=client_id)

    def _check(self, request: Any, context: Any) -> None:
        with self._lock:
            known = request.clientId in self._registered
        if request.role not in JOB_ROLES or not known:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "call Register with an allowed role first")

    def SubscribeJobSummarySignal(self, request: Any, context: Any) -> Iterator[Any]:
        self._check(request, context)
        sub = self.cd.hub.subscribe(TOPIC_JOB, snapshot=self.cd.job_summaries)
        try:
            while context.is_active() and not self.stop.is_set():
                item = sub.get(_STREAM_POLL_S)
                if item is not None:
                    yield job_pb2.JobSummarySignal(**item)
        finally:
            sub.close()

    def SubscribeJobSummarySignalList(self, request: Any, context: Any) -> Iterator[Any]:
        self._check(request, context)
        # The first queued item triggers the initial list; every later change sends the list again.
        sub = self.cd.hub.subscribe(TOPIC_JOB, snapshot=lambda: ["initial"])
        try:
            while context.is_active() and not self.stop.is_set():
                if sub.get(_STREAM_POLL_S) is None:
                    continue
                summaries = [job_pb2.JobSummarySignal(**s) for s in self.cd.job_summaries()]
                yield job_pb2.JobSummarySignalList(
                    jobSummarySignals=summaries, ReportTime=str(int(time.time())), JobTotalNum=len(summaries)
                )
        finally:
            sub.close()


class PubFaultService:
    """``PubFault/SendPublicFault``: a public fault on a node hits every job with a pod there."""

    def __init__(self, clusterd: ClusterD) -> None:
        self.cd = clusterd

    def SendPublicFault(self, request: Any, context: Any) -> Any:
        if request.version and request.version != "1.0":
            return pubfault_pb2.RespStatus(code=400, info=f"unsupported version {request.version!r}")
        injected: list[str] = []
        try:
            pods = self.cd.kube.core.list_pod_for_all_namespaces().items
        except Exception as exc:
            return pubfault_pb2.RespStatus(code=500, info=f"cannot list pods: {exc}")
        for fault in request.faults:
            kind = PUBLIC_FAULT_KINDS.get(fault.faultType)
            if kind is None:
                return pubfault_pb2.RespStatus(code=400, info=f"unknown faultType {fault.faultType!r}")
            if fault.assertion == "recover":
                continue  # a recovery notice: nothing to inject
            nodes = {i.nodeName for i in fault.influence if i.nodeName}
            for pod in pods:
                meta, node = pod.metadata, pod.spec.node_name if pod.spec else None
                labels = (meta.labels if meta else None) or {}
                if meta is None or node not in nodes or not labels.get(LABEL_JOB_NAME):
                    continue
                devices = next((list(i.deviceIds) for i in fault.influence if i.nodeName == node), [])
                spec = FaultSpec(
                    namespace=meta.namespace or "",
                    job=labels[LABEL_JOB_NAME],
                    rank=int((meta.annotations or {}).get(ANNOTATION_RANK_INDEX, 0)),
                    kind=kind,
                    code=fault.faultCode or None,
                    level="SeparateNPU" if kind == "normal" else None,
                    device=devices[0] if devices else 0,
                )
                try:
                    injected.append(self.cd.inject(spec))
                except UnknownJobError as exc:
                    log.info("public fault skipped: %s", exc)
        return pubfault_pb2.RespStatus(
            code=OK, info=f"injected {len(injected)} fault(s): {', '.join(injected)}"
        )


class RecoverService:
    """``Recover``: the TaskD side of process-level recovery (codes of mindcluster.md §6.2)."""

    def __init__(self, clusterd: ClusterD, stop: threading.Event) -> None:
        self.cd = clusterd
        self.stop = stop
        self._initialised: set[str] = set()
        self.reports: list[tuple[str, Any]] = []  # (rpc name, request) for observers and tests
        self._lock = threading.Lock()

    def _podgroup(self, job_id: str) -> dict[str, Any] | None:
        record = self.cd.find_job_by_uid(job_id)
        if record is None:
            return None
        return self.cd.kube.get_podgroup(record.namespace, f"{record.name}-{record.uid}")

    def Init(self, request: Any, context: Any) -> Any:
        """Snapshot the job's recovery config once (fault_recover_service.go:570-592); 403
        ProcessRecoverEnableOff unless process-recover-enable=on or subHealthyStrategy=hotSwitch."""
        code, info = self.cd.init_job(request.jobId)
        if code == OK:
            with self._lock:
                self._initialised.add(request.jobId)
        return recover_pb2.Status(code=code, info=info)

    def Register(self, request: Any, context: Any) -> Any:
        with self._lock:
            initialised = request.jobId in self._initialised
        if not initialised:
            return recover_pb2.Status(code=CODE_UNINIT, info="UnInit: call Init first")
        podgroup = self._podgroup(request.jobId)
        if podgroup is None:
            return recover_pb2.Status(code=CODE_JOB_NOT_EXIST, info="JobNotExist: no PodGroup")
        record = self.cd.find_job_by_uid(request.jobId)
        assert record is not None
        self.cd.kube.patch_podgroup(
            record.namespace,
            podgroup["metadata"]["name"],
            {"metadata": {"labels": {k.LABEL_PROCESS_RECOVER_ENABLE: "on"}}},
        )
        return recover_pb2.Status(code=OK, info="ok")

    def SubscribeProcessManageSignal(self, request: Any, context: Any) -> Iterator[Any]:
        with self._lock:
            initialised = request.jobId in self._initialised
        if not initialised:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "UnInit: call Init and Register first")
        sub = self.cd.hub.subscribe(topic_process(request.jobId))
        try:
            while context.is_active() and not self.stop.is_set():
                item = sub.get(_STREAM_POLL_S)
                if item is None:
                    continue
                ranks = [recover_pb2.FaultRank(**r) for r in item["faultRanks"]]
                yield recover_pb2.ProcessManageSignal(**{**item, "faultRanks": ranks})
        finally:
            sub.close()

    def _report(self, name: str, request: Any) -> Any:
        with self._lock:
            self.reports.append((name, request))
        if self.cd.find_job_by_uid(request.jobId) is None:
            return recover_pb2.Status(code=CODE_JOB_NOT_EXIST, info="JobNotExist")
        return recover_pb2.Status(code=OK, info="ok")

    def ReportStopComplete(self, request: Any, context: Any) -> Any:
        return self._report("ReportStopComplete", request)

    def ReportRecoverStrategy(self, request: Any, context: Any) -> Any:
        return self._report("ReportRecoverStrategy", request)

    def ReportRecoverStatus(self, request: Any, context: Any) -> Any:
        return self._report("ReportRecoverStatus", request)

    def ReportProcessFault(self, request: Any, context: Any) -> Any:
        return self._report("ReportProcessFault", request)

    def HealthCheck(self, request: Any, context: Any) -> Any:
        return recover_pb2.Status(code=OK, info="ok")


class ClusterDGrpcServer:
    """All four services on one port."""

    def __init__(self, clusterd: ClusterD, host: str = "127.0.0.1", port: int = 0) -> None:
        self.cd = clusterd
        self._stop = threading.Event()
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="clusterd-grpc")
        )
        self.recover = RecoverService(clusterd, self._stop)
        fault_pb2_grpc.add_FaultServicer_to_server(FaultService(clusterd, self._stop), self.server)
        job_pb2_grpc.add_JobServicer_to_server(JobService(clusterd, self._stop), self.server)
        pubfault_pb2_grpc.add_PubFaultServicer_to_server(PubFaultService(clusterd), self.server)
        recover_pb2_grpc.add_RecoverServicer_to_server(self.recover, self.server)
        self.port = self.server.add_insecure_port(f"{host}:{port}")
        self.host = host

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self._stop.set()
        self.server.stop(grace=0.5).wait(5)

"""ClusterD's ``fault.Fault`` service over gRPC (clusterd-wire.md), returned as plain frozen dataclasses.

The generated message and stub modules come from ``mindcluster.wire.grpc_gen`` (built from protos
whose names and field numbers match the real ClusterD), so the same client works against the
simulator and a real ``clusterd-grpc-svc:8899``. Failures become ``ClusterDError`` (retryable unless
the server said the request itself is wrong).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc

from mindcluster.wire.grpc_gen import fault_pb2, fault_pb2_grpc

DEFAULT_ROLE = "DefaultUser1"
CONNECT_TIMEOUT_S = 5.0
CALL_TIMEOUT_S = 10.0
_PERMANENT_CODES = frozenset(
    {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNIMPLEMENTED}
)


class ClusterDError(Exception):
    """A failed call to ClusterD; ``permanent`` when retrying the same request cannot help."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent


@dataclass(frozen=True)
class DeviceFault:
    """One ``DeviceFaultInfo``: a chip (``device_id`` ``"-1"`` = the node itself) and its fault codes."""

    device_id: str
    device_type: str
    codes: tuple[str, ...]
    level: str
    fault_types: tuple[str, ...]
    reasons: tuple[str, ...]

    @property
    def identity(self) -> str:
        return f"{self.device_id}|{','.join(sorted(self.codes))}"


@dataclass(frozen=True)
class NodeFault:
    """One ``NodeFaultInfo``."""

    node_name: str
    node_ip: str
    node_sn: str
    level: str
    devices: tuple[DeviceFault, ...]


@dataclass(frozen=True)
class FaultSignal:
    """One ``FaultMsgSignal``: the current faults of one job (``job_id`` is the AscendJob uid)."""

    uuid: str
    job_id: str
    signal_type: str  # "fault" or "normal"
    nodes: tuple[NodeFault, ...]


def signal_from_message(message: Any) -> FaultSignal:
    """Convert a generated ``FaultMsgSignal`` into plain data (also used by tests)."""
    nodes = tuple(_node_from_message(node) for node in message.nodeFaultInfo)
    return FaultSignal(uuid=message.uuid, job_id=message.jobId, signal_type=message.signalType, nodes=nodes)


def _node_from_message(node: Any) -> NodeFault:
    """A ``NodeFaultInfo`` and its ``DeviceFaultInfo`` list."""
    devices = tuple(
        DeviceFault(
            device_id=device.deviceId,
            device_type=device.deviceType,
            codes=tuple(device.faultCodes),
            level=device.faultLevel,
            fault_types=tuple(device.faultType),
            reasons=tuple(device.faultReason),
        )
        for device in node.faultDevice
    )
    return NodeFault(
        node_name=node.nodeName,
        node_ip=node.nodeIP,
        node_sn=node.nodeSN,
        level=node.faultLevel,
        devices=devices,
    )


def _translate(exc: grpc.RpcError, what: str) -> ClusterDError:
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    return ClusterDError(
        f"{what}: {code.name if code else 'error'}: {details}", permanent=code in _PERMANENT_CODES
    )


class FaultStream:
    """A ``SubscribeFaultMsgSignal`` stream that another thread can cancel with ``close()``."""

    def __init__(self, address: str, *, job_id: str = "", role: str = DEFAULT_ROLE) -> None:
        self.address = address
        self.job_id = job_id
        self.role = role
        self._channel: grpc.Channel | None = None
        self._call: Any = None
        self._lock = threading.Lock()
        self._closed = False

    def __iter__(self) -> Iterator[FaultSignal]:
        """Register, subscribe, and yield signals: the full state first, then changes only."""
        channel = grpc.insecure_channel(self.address)
        with self._lock:
            if self._closed:
                channel.close()
                return
            self._channel = channel
        try:
            grpc.channel_ready_future(channel).result(timeout=CONNECT_TIMEOUT_S)
        except grpc.FutureTimeoutError as exc:
            self.close()
            raise ClusterDError(f"ClusterD at {self.address} is not reachable") from exc
        stub = fault_pb2_grpc.FaultStub(channel)
        request = fault_pb2.ClientInfo(jobId=self.job_id, role=self.role)
        try:
            status = stub.Register(request, timeout=CALL_TIMEOUT_S)
            if status.code != 0:
                raise ClusterDError(
                    f"fault.Fault/Register refused: {status.code} {status.info}", permanent=True
                )
            call = stub.SubscribeFaultMsgSignal(request)
            with self._lock:
                self._call = call
            for message in call:
                yield signal_from_message(message)
        except grpc.RpcError as exc:
            if self._closed:
                return
            raise _translate(exc, "fault.Fault/SubscribeFaultMsgSignal") from exc
        finally:
            self.close()

    def close(self) -> None:
        """Cancel the stream (safe from any thread, safe twice)."""
        with self._lock:
            self._closed = True
            call, channel = self._call, self._channel
            self._call = self._channel = None
        if call is not None:
            call.cancel()
        if channel is not None:
            channel.close()


def get_faults(address: str, *, job_id: str = "", role: str = DEFAULT_ROLE) -> FaultSignal:
    """One ``GetFaultMsgSignal`` query. ClusterD serves 10 a second: a caller over that waits for a
    token up to 5 s (or its deadline) and is then refused with an error, which reaches us as an
    UNKNOWN status (advance_limiter.go:33-60, grpc_service.go:188-194): a retryable error."""
    with grpc.insecure_channel(address) as channel:
        stub = fault_pb2_grpc.FaultStub(channel)
        try:
            result = stub.GetFaultMsgSignal(
                fault_pb2.ClientInfo(jobId=job_id, role=role), timeout=CALL_TIMEOUT_S
            )
        except grpc.RpcError as exc:
            raise _translate(exc, "fault.Fault/GetFaultMsgSignal") from exc
    if result.code != 200:
        raise ClusterDError(f"GetFaultMsgSignal: {result.code} {result.info}", permanent=result.code < 429)
    if job_id and not result.HasField("faultSignal"):
        # A job without fault info is answered 200 with no signal at all:
        # component/clusterd/pkg/application/fault/grpc_service.go:207-214. It has no faults.
        return FaultSignal(uuid=f"query-{uuid.uuid4()}", job_id=job_id, signal_type="normal", nodes=())
    return signal_from_message(result.faultSignal)


def get_faults_retrying(
    address: str,
    *,
    job_id: str,
    retry_every: float,
    give_up_after: float,
    stop: threading.Event | None = None,
) -> FaultSignal:
    """``get_faults``, asked again after a retryable refusal (ClusterD allows 10 queries/s and
    refuses more: an UNKNOWN status, or a 429 result) until ``give_up_after`` seconds; raises the
    last error, at once for a permanent one or when ``stop`` is set while waiting."""
    give_up = time.monotonic() + give_up_after
    while True:
        try:
            return get_faults(address, job_id=job_id)
        except ClusterDError as exc:
            if exc.permanent or time.monotonic() + retry_every > give_up:
                raise
            if stop is not None:
                if stop.wait(retry_every):
                    raise
            else:
                time.sleep(retry_every)

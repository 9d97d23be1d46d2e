"""ClusterD over real gRPC, with clients built from our .proto files (clusterd-wire.md)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from mindcluster.wire.grpc_gen import fault_pb2, job_pb2, pubfault_pb2, recover_pb2
from mindcluster.wire.grpc_gen.services import (
    fault_pb2_grpc,
    job_pb2_grpc,
    pubfault_pb2_grpc,
    recover_pb2_grpc,
)
from simcluster.runtime import SimCluster
from tests.support.sim import create_job, event_reasons, make_job


@pytest.fixture(scope="module")
def sim_clock_speed() -> float:
    # 100x on the shared SimCluster: the 300 s platform wait lasts 3 s, long enough to watch a fault stay up.
    return 100


@pytest.fixture(scope="module")
def channel(sim: SimCluster) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(sim.grpc_address) as ch:
        yield ch


class StreamReader:
    """Reads a server stream in a thread so tests can wait for messages with a timeout."""

    def __init__(self, call) -> None:
        self.call = call
        self.messages: queue.Queue = queue.Queue()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        try:
            for message in self.call:
                self.messages.put(message)
        except grpc.RpcError:
            pass

    def next(self, timeout: float = 10.0):
        return self.messages.get(timeout=timeout)

    def until(self, predicate, timeout: float = 15.0):
        while True:
            message = self.next(timeout)
            if predicate(message):
                return message

    def cancel(self) -> None:
        self.call.cancel()


def test_fault_stream_sends_full_state_then_changes(sim, kube, channel) -> None:
    stub = fault_pb2_grpc.FaultStub(channel)
    assert stub.Register(fault_pb2.ClientInfo(jobId="", role="dashboard")).code == 0
    first = StreamReader(stub.SubscribeFaultMsgSignal(fault_pb2.ClientInfo(jobId="", role="dashboard")))
    # The first message is the cluster's full current state. The cluster is shared by the test process's
    # modules, so another module's job may still be faulty: whatever it holds, it is consistent.
    current = first.next()
    assert current.signalType in ("normal", "fault")
    assert (current.signalType == "normal") == (not current.nodeFaultInfo)
    # A platform-mode job nobody answers keeps its fault active for the whole (scaled) 300 s wait.
    job = create_job(kube, make_job("grpc-fault", annotations={"ProcessRecoverStrategy": ""}))
    uid = job["metadata"]["uid"]
    sim.inject_fault("default", "grpc-fault", rank=1, fault_type="uce", recovers=True)
    fault = first.until(lambda m: m.jobId == uid)
    assert fault.signalType == "fault"
    node = fault.nodeFaultInfo[0]
    assert node.nodeName.startswith("node-")
    assert list(node.faultDevice[0].faultCodes) == ["80E01801"]
    # A late subscriber first gets the full current state: this job's fault.
    late = StreamReader(stub.SubscribeFaultMsgSignal(fault_pb2.ClientInfo(jobId="", role="dashboard")))
    snapshot = late.until(lambda m: m.jobId == uid)  # (other modules' faulty jobs may come first)
    assert snapshot.signalType == "fault"
    # ...then only changes: the job is healthy again once ClusterD is done.
    assert first.until(lambda m: m.jobId == uid and m.signalType == "normal")
    assert late.until(lambda m: m.jobId == uid and m.signalType == "normal")
    first.cancel()
    late.cancel()
    assert sim.wait_idle(20)


def test_get_fault_msg_signal_queues_callers_then_refuses_with_an_error(channel) -> None:
    """component/clusterd/pkg/common/util/advance_limiter.go:33-60 (rate 10/s, burst 10, 50
    waiting: grpc_service.go:46-48,73): over the rate a caller waits for a token, up to 5 s or its
    own deadline, and only then is refused; the refusal (grpc_service.go:188-194) is a 429 result
    returned with an error, which grpc-go sends as an UNKNOWN status and no result."""
    stub = fault_pb2_grpc.FaultStub(channel)
    threading.Event().wait(1.1)  # a full bucket
    started = time.monotonic()
    codes = [stub.GetFaultMsgSignal(fault_pb2.ClientInfo(jobId=""), timeout=10).code for _ in range(15)]
    assert codes == [200] * 15  # waited for, not refused
    assert time.monotonic() - started >= 0.35  # the last 5 waited about 0.1 s each

    threading.Event().wait(1.1)
    outcomes: list[str] = []

    def ask() -> None:
        try:
            stub.GetFaultMsgSignal(fault_pb2.ClientInfo(jobId=""), timeout=0.3)
            outcomes.append("200")
        except grpc.RpcError as exc:
            if exc.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
                # Admitted to wait for a token, but the answer came after this caller's own 0.3 s
                # (a loaded machine): the wait runs under the caller's context
                # (advance_limiter.go:52-58), so grpc-go gives up the same way. Not a refusal.
                outcomes.append("waited past its deadline")
            else:
                outcomes.append(f"{exc.code().name}: {exc.details()}")

    callers = [threading.Thread(target=ask) for _ in range(25)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(10)
    refused = "UNKNOWN: rate limited, there is too many requests, please retry later"
    assert set(outcomes) - {"waited past its deadline"} == {"200", refused}, outcomes
    assert outcomes.count("200") >= 10 and outcomes.count(refused) >= 5


def test_get_fault_msg_signal_of_a_job_without_faults_has_no_signal(channel) -> None:
    """component/clusterd/pkg/application/fault/grpc_service.go:199-214: a job with no fault info
    is answered 200 with no FaultSignal at all (not a ``normal`` one); an id outside 8-128
    characters is refused with InvalidReqParam and an error, which grpc-go turns into an UNKNOWN
    status without the body."""
    stub = fault_pb2_grpc.FaultStub(channel)
    healthy = stub.GetFaultMsgSignal(fault_pb2.ClientInfo(jobId="healthy-job-uid-0001"), timeout=10)
    assert healthy.code == 200 and "not found fault info" in healthy.info
    assert not healthy.HasField("faultSignal")
    with pytest.raises(grpc.RpcError) as refused:
        stub.GetFaultMsgSignal(fault_pb2.ClientInfo(jobId="short"), timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNKNOWN and "is invalid" in refused.value.details()


def test_recover_init_refuses_jobs_with_process_recovery_off(kube, channel) -> None:
    job = create_job(kube, make_job("grpc-off", strategies=None))
    stub = recover_pb2_grpc.RecoverStub(channel)
    info = recover_pb2.ClientInfo(jobId=job["metadata"]["uid"], role="taskd")
    status = stub.Init(info)
    # fault_recover_service.go:550-555: code 403 ProcessRecoverEnableOff (domain/common/code.go:28).
    assert status.code == 403 and "ProcessRecoverEnableOff" in status.info
    assert stub.Register(info).code == 408  # Register without a successful Init
    assert stub.Init(recover_pb2.ClientInfo(jobId="no-such-job-uid", role="taskd")).code == 402


def test_recover_flow_streams_process_manage_signals(sim, kube, channel) -> None:
    job = create_job(kube, make_job("grpc-recover"))
    stub = recover_pb2_grpc.RecoverStub(channel)
    info = recover_pb2.ClientInfo(jobId=job["metadata"]["uid"], role="taskd")
    assert stub.Init(info).code == 0
    assert stub.Register(info).code == 0
    assert stub.HealthCheck(info).code == 0
    signals = StreamReader(stub.SubscribeProcessManageSignal(info))
    report = recover_pb2.RecoverStrategyRequest(
        jobId=info.jobId,
        strategies=["retry", "exit"],
        faultRanks=[recover_pb2.FaultRank(rankId="8", faultType="0")],
    )
    assert stub.ReportRecoverStrategy(report).code == 0
    sim.inject_fault("default", "grpc-recover", rank=1, fault_type="uce", recovers=True)
    types = [signals.next().signalType for _ in range(3)]
    assert types == ["stopTrain", "globalFault", "changeStrategy"]
    signals.cancel()
    assert sim.wait_idle(20)


def test_job_service_requires_an_allowed_role_and_streams_summaries(kube, channel) -> None:
    create_job(kube, make_job("grpc-summary"))
    stub = job_pb2_grpc.JobStub(channel)
    assert stub.Register(job_pb2.ClientInfo(role="Hacker")).code != 0
    status = stub.Register(job_pb2.ClientInfo(role="DefaultUser1", clientId="dash-1"))
    assert status.code == 0 and status.clientId == "dash-1"
    reader = StreamReader(
        stub.SubscribeJobSummarySignal(job_pb2.ClientInfo(role="DefaultUser1", clientId="dash-1"))
    )
    summary = reader.until(lambda m: m.jobName == "grpc-summary")
    assert summary.namespace == "default" and summary.frameWork == "pytorch" and summary.operator == "add"
    reader.cancel()
    lists = StreamReader(
        stub.SubscribeJobSummarySignalList(job_pb2.ClientInfo(role="DefaultUser1", clientId="dash-1"))
    )
    first = lists.next()
    assert first.JobTotalNum == len(first.jobSummarySignals) >= 1
    lists.cancel()


def test_job_stream_without_register_is_denied(channel) -> None:
    stub = job_pb2_grpc.JobStub(channel)
    with pytest.raises(grpc.RpcError) as err:
        next(iter(stub.SubscribeJobSummarySignal(job_pb2.ClientInfo(role="DefaultUser2", clientId="never"))))
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_public_fault_hits_the_job_on_that_node(sim, kube, channel) -> None:
    job = create_job(kube, make_job("grpc-pub", strategies=None))
    node = kube.list_job_pods("default", "grpc-pub")[1]["spec"]["nodeName"]
    stub = pubfault_pb2_grpc.PubFaultStub(channel)
    request = pubfault_pb2.PublicFaultRequest(
        id="pf-1",
        timestamp=1,
        version="1.0",
        resource="chaos",
        faults=[
            pubfault_pb2.Fault(
                faultId="f1",
                faultType="Node",
                faultCode="010001001",
                assertion="occur",
                influence=[pubfault_pb2.PubFaultInfo(nodeName=node)],
            )
        ],
    )
    status = stub.SendPublicFault(request)
    assert status.code == 0 and "1 fault" in status.info
    assert sim.wait_idle(20)
    assert "FaultDetected" in event_reasons(kube, job)
    bad = pubfault_pb2.PublicFaultRequest(version="1.0", faults=[pubfault_pb2.Fault(faultType="Cosmic")])
    assert stub.SendPublicFault(bad).code == 400


def test_a_fault_signal_names_its_fault_only_where_asked(sim, kube, channel) -> None:
    """Real ClusterD leaves a device's ``faultReason`` empty (component/clusterd/pkg/application/
    faultmanager/faultclusterprocess/cluster_fault_processor.go:234, ``FaultReason: nil``). The
    narrative cluster (its Events on, the default) names the injected fault there; a cluster without
    ClusterD's Events does not, unless asked for the ids alone (a benchmark matching what it injected)."""
    assert sim.clusterd is not None
    stub = fault_pb2_grpc.FaultStub(channel)
    job = create_job(kube, make_job("grpc-reason"))
    uid = job["metadata"]["uid"]
    stream = StreamReader(stub.SubscribeFaultMsgSignal(fault_pb2.ClientInfo(jobId=uid, role="dashboard")))
    named = sim.clusterd.names_faults
    try:
        for names_faults in (True, False):
            sim.clusterd.names_faults = names_faults
            fault_id = sim.inject_fault("default", "grpc-reason", rank=1, fault_type="uce", recovers=True)
            signal = stream.until(
                lambda m: (
                    m.signalType == "fault"
                    and any(d.faultCodes for n in m.nodeFaultInfo for d in n.faultDevice)
                )
            )
            reasons = [r for n in signal.nodeFaultInfo for d in n.faultDevice for r in d.faultReason]
            assert reasons == ([fault_id] if names_faults else [])
            assert sim.wait_idle(20)
    finally:
        sim.clusterd.names_faults = named
        stream.cancel()


def test_the_cluster_without_events_names_no_fault_by_default() -> None:
    assert SimCluster(clusterd_events=False).clusterd_fault_ids is False
    assert SimCluster().clusterd_fault_ids is True
    assert SimCluster(clusterd_events=False, clusterd_fault_ids=True).clusterd_fault_ids is True

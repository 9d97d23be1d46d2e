"""The ClusterD wire contract: committed ``_pb2`` modules match the protos; stubs built from descriptors.

``mindcluster.wire.grpc_gen.services`` replaces protoc's ``*_pb2_grpc.py``: each service's stub,
servicer base and registration are read off the service descriptor. These tests pin what protoc's
plugin would have given (method names, paths, streaming shape, UNIMPLEMENTED defaults).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from mindcluster.wire.grpc_gen import (
    fault_pb2,
    fault_pb2_grpc,
    pubfault_pb2,
    pubfault_pb2_grpc,
    recover_pb2,
    services,
)
from mindcluster.wire.protos import GEN_DIR, generate, generated_files


def test_committed_message_modules_are_what_protoc_makes_of_the_protos(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    generate(tmp_path)
    fresh = sorted(p.name for p in tmp_path.iterdir())
    assert fresh == sorted(p.name for p in generated_files())
    for name in fresh:
        assert (tmp_path / name).read_text() == (GEN_DIR / name).read_text(), f"{name} is stale"
    assert not list(GEN_DIR.glob("*_pb2_grpc.py")), "gRPC stubs come from grpc_gen.services"


def test_every_service_has_the_names_protoc_would_generate() -> None:
    for pb2, name in services.SERVICES:
        module = getattr(services, f"{pb2.__name__.rsplit('.', 1)[1]}_grpc")
        descriptor = pb2.DESCRIPTOR.services_by_name[name]
        servicer = getattr(module, f"{name}Servicer")
        assert {m.name for m in descriptor.methods} <= set(vars(servicer))
        assert callable(getattr(module, f"add_{name}Servicer_to_server"))
        assert getattr(module, f"{name}Stub").__name__ == f"{name}Stub"


class _HalfFault:
    """Implements only GetFaultMsgSignal; the other Fault methods must answer UNIMPLEMENTED."""

    def GetFaultMsgSignal(self, request: fault_pb2.ClientInfo, context: object) -> fault_pb2.FaultQueryResult:
        return fault_pb2.FaultQueryResult(code=200, info=request.jobId)


class _PubFault(pubfault_pb2_grpc.PubFaultServicer):
    """Subclasses the built servicer base without overriding anything."""


@pytest.fixture(scope="module")
def channel() -> Iterator[grpc.Channel]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    fault_pb2_grpc.add_FaultServicer_to_server(_HalfFault(), server)
    pubfault_pb2_grpc.add_PubFaultServicer_to_server(_PubFault(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as chan:
        yield chan
    server.stop(grace=0).wait(5)


def test_a_built_stub_calls_the_registered_method_by_its_path(channel: grpc.Channel) -> None:
    stub = fault_pb2_grpc.FaultStub(channel)
    result = stub.GetFaultMsgSignal(fault_pb2.ClientInfo(jobId="job-1"), timeout=5)
    assert (result.code, result.info) == (200, "job-1")
    # The same call by its raw path: /<package>.<Service>/<Method>, as a real client would send it.
    raw = channel.unary_unary(
        "/fault.Fault/GetFaultMsgSignal",
        request_serializer=fault_pb2.ClientInfo.SerializeToString,
        response_deserializer=fault_pb2.FaultQueryResult.FromString,
    )
    assert raw(fault_pb2.ClientInfo(jobId="job-2"), timeout=5).info == "job-2"


def test_a_method_the_servicer_lacks_answers_unimplemented(channel: grpc.Channel) -> None:
    stub = fault_pb2_grpc.FaultStub(channel)
    with pytest.raises(grpc.RpcError) as unary:
        stub.Register(fault_pb2.ClientInfo(jobId="j"), timeout=5)
    assert unary.value.code() == grpc.StatusCode.UNIMPLEMENTED
    with pytest.raises(grpc.RpcError) as stream:
        list(stub.SubscribeFaultMsgSignal(fault_pb2.ClientInfo(jobId="j"), timeout=5))
    assert stream.value.code() == grpc.StatusCode.UNIMPLEMENTED
    with pytest.raises(grpc.RpcError) as inherited:
        pubfault_pb2_grpc.PubFaultStub(channel).SendPublicFault(pubfault_pb2.PublicFaultRequest(), timeout=5)
    assert inherited.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_a_service_without_a_package_is_addressed_by_its_bare_name() -> None:
    # recover.proto has no package: the real TaskD calls /Recover/Init (clusterd-wire.md).
    descriptor = recover_pb2.DESCRIPTOR.services_by_name["Recover"]
    assert services._path(descriptor, descriptor.methods_by_name["Init"]) == "/Recover/Init"

"""The gRPC client stubs and server registrations of ClusterD's four services, built from descriptors.

Written by hand, not by protoc: what ``grpc_python_out`` would generate per service (a ``<Name>Stub``,
a ``<Name>Servicer`` base whose methods answer UNIMPLEMENTED, and ``add_<Name>Servicer_to_server``)
follows entirely from the service descriptor in the ``*_pb2`` message module (method names, request
and response types, which side streams). So one table (``SERVICES``) and three builders replace four
generated files, and a method added to a .proto needs only the ``_pb2`` modules regenerated.

The modules ``fault_pb2_grpc`` … ``recover_pb2_grpc`` below keep the generated modules' public names,
so ``from mindcluster.wire.grpc_gen import fault_pb2_grpc`` and ``fault_pb2_grpc.FaultStub(channel)``
read as they always did.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any, Final, Protocol

import grpc
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message_factory import GetMessageClass

from . import fault_pb2, job_pb2, pubfault_pb2, recover_pb2

# (message module, service name): every service ClusterD serves (clusterd-wire.md).
SERVICES: Final[tuple[tuple[ModuleType, str], ...]] = (
    (fault_pb2, "Fault"),
    (job_pb2, "Job"),
    (pubfault_pb2, "PubFault"),
    (recover_pb2, "Recover"),
)

# (client streams, server streams) -> the channel's call factory and the server's handler factory.
_CHANNEL_CALLS: Final = {
    (False, False): "unary_unary",
    (False, True): "unary_stream",
    (True, False): "stream_unary",
    (True, True): "stream_stream",
}
_SERVER_HANDLERS: Final[dict[tuple[bool, bool], Callable[..., grpc.RpcMethodHandler[Any, Any]]]] = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


class _Server(Protocol):
    def add_generic_rpc_handlers(self, handlers: tuple[grpc.GenericRpcHandler, ...]) -> None: ...


def _shape(method: MethodDescriptor) -> tuple[bool, bool]:
    return (bool(method.client_streaming), bool(method.server_streaming))


def _path(service: ServiceDescriptor, method: MethodDescriptor) -> str:
    """The HTTP/2 path of a call: ``/<package>.<Service>/<Method>`` (no package: ``/Recover/Init``)."""
    return f"/{service.full_name}/{method.name}"


def stub_class(service: ServiceDescriptor) -> type:
    """``<Name>Stub``: one callable attribute per method, made by the channel's call factory."""

    def __init__(self: Any, channel: grpc.Channel) -> None:
        for method in service.methods:
            factory = getattr(channel, _CHANNEL_CALLS[_shape(method)])
            call = factory(
                _path(service, method),
                request_serializer=GetMessageClass(method.input_type).SerializeToString,
                response_deserializer=GetMessageClass(method.output_type).FromString,
                _registered_method=True,
            )
            setattr(self, method.name, call)

    return type(
        f"{service.name}Stub", (), {"__init__": __init__, "__doc__": f"Client of {service.full_name}."}
    )


def _unimplemented(request: Any, context: grpc.ServicerContext) -> Any:
    context.set_code(grpc.StatusCode.UNIMPLEMENTED)
    context.set_details("Method not implemented!")
    raise NotImplementedError("Method not implemented!")


def servicer_class(service: ServiceDescriptor) -> type:
    """``<Name>Servicer``: the base a server subclasses; a method it does not override is UNIMPLEMENTED."""
    methods = {
        method.name: lambda self, request, context: _unimplemented(request, context)
        for method in service.methods
    }
    return type(f"{service.name}Servicer", (), {**methods, "__doc__": f"Server of {service.full_name}."})


def add_to_server(service: ServiceDescriptor, servicer: object, server: _Server) -> None:
    """Register ``servicer``'s methods for ``service`` on a ``grpc.server``.

    ``servicer`` need not subclass ``<Name>Servicer``: a method it lacks answers UNIMPLEMENTED.
    """
    handlers = {
        method.name: _SERVER_HANDLERS[_shape(method)](
            getattr(servicer, method.name, _unimplemented),
            request_deserializer=GetMessageClass(method.input_type).FromString,
            response_serializer=GetMessageClass(method.output_type).SerializeToString,
        )
        for method in service.methods
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    # grpcio >= 1.63 also routes registered methods without the generic lookup (what protoc emits).
    register = getattr(server, "add_registered_method_handlers", None)
    if register is not None:
        register(service.full_name, handlers)


def _grpc_module(pb2: ModuleType, name: str) -> ModuleType:
    """A stand-in for protoc's ``<file>_pb2_grpc`` module, with the same three public names."""
    service = pb2.DESCRIPTOR.services_by_name[name]
    module = ModuleType(f"{pb2.__name__}_grpc", f"gRPC stubs of {service.full_name}, built by {__name__}.")
    setattr(module, f"{name}Stub", stub_class(service))
    setattr(module, f"{name}Servicer", servicer_class(service))

    def add_servicer_to_server(servicer: object, server: _Server) -> None:
        add_to_server(service, servicer, server)

    setattr(module, f"add_{name}Servicer_to_server", add_servicer_to_server)
    return module


fault_pb2_grpc, job_pb2_grpc, pubfault_pb2_grpc, recover_pb2_grpc = (
    _grpc_module(pb2, name) for pb2, name in SERVICES
)

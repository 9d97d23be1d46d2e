"""Generated protobuf modules for the ClusterD wire contract (see ``mindcluster/wire/protos``).

The ``*_pb2`` message modules (and their ``.pyi`` types) are protoc's output, committed to the
repository and regenerated at import time if any is missing. The gRPC stubs are not generated: the
hand-written ``services`` builds them from the message modules' service descriptors and provides the
``<file>_pb2_grpc`` names protoc's gRPC plugin would have.
"""

from mindcluster.wire.protos import generate as _generate, generated_files as _generated_files

if not all(path.exists() for path in _generated_files()):
    _generate()

from .services import (  # noqa: E402  (after the regeneration above: services imports the _pb2 modules)
    fault_pb2_grpc,
    job_pb2_grpc,
    pubfault_pb2_grpc,
    recover_pb2_grpc,
)

__all__ = ["fault_pb2_grpc", "job_pb2_grpc", "pubfault_pb2_grpc", "recover_pb2_grpc"]

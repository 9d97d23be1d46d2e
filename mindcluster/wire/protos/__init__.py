"""The ClusterD wire contract as .proto files, and the code generator for ``grpc_gen``."""

from __future__ import annotations

import re
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
GEN_DIR = PROTO_DIR.parent / "grpc_gen"
PROTO_NAMES = ("recover", "fault", "job", "pubfault")
# protoc's absolute import of a sibling module (a .proto importing another), rewritten to a
# package-relative one.
_PB2_IMPORT = re.compile(r"^import (\w+_pb2) as", re.MULTILINE)


def generated_files() -> list[Path]:
    """Every module ``generate`` writes (the ``.pyi`` stubs give mypy the message classes).

    No ``_pb2_grpc.py``: the gRPC stubs are built from the service descriptors (``grpc_gen.services``).
    """
    suffixes = ("_pb2.py", "_pb2.pyi")
    return [GEN_DIR / f"{name}{suffix}" for name in PROTO_NAMES for suffix in suffixes]


def generate(out_dir: Path = GEN_DIR) -> None:
    """Run grpcio-tools' protoc over the .proto files and make the imports package-relative.

    protoc writes ``import fault_pb2`` for a .proto that imports another; inside a package that must
    be ``from . import fault_pb2``. ``out_dir``: another folder, to compare a fresh run with the
    committed modules.
    """
    from grpc_tools import protoc  # imported lazily: only needed when regenerating

    protos = [str(PROTO_DIR / f"{name}.proto") for name in PROTO_NAMES]
    outputs = [f"--python_out={out_dir}", f"--pyi_out={out_dir}"]
    args = ["protoc", f"-I{PROTO_DIR}", *outputs, *protos]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed for {protos}")
    for path in [*out_dir.glob("*_pb2.py"), *out_dir.glob("*_pb2.pyi")]:
        text = path.read_text()
        text = _PB2_IMPORT.sub(r"from . import \1 as", text)
        path.write_text(text)

"""The ClusterD wire contract as .proto files, and the code generator for ``grpc_gen``."""

from __future__ import annotations

import re
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
GEN_DIR = PROTO_DIR.parent / "grpc_gen"
PROTO_NAMES = ("recover", "fault", "job", "pubfault")
# protoc's absolute import of a sibling module, rewritten to a package-relative one.
_PB2_IMPORT = re.compile(r"^import (\w+_pb2) as", re.MULTILINE)


def generated_files() -> list[Path]:
    """Every module ``generate`` writes (the ``.pyi`` stubs give mypy the message classes)."""
    suffixes = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")
    return [GEN_DIR / f"{name}{suffix}" for name in PROTO_NAMES for suffix in suffixes]


def generate() -> None:
    """Run grpcio-tools' protoc over the .proto files and make the imports package-relative.

    protoc writes ``import fault_pb2``; inside a package that must be ``from . import fault_pb2``.
    """
    from grpc_tools import protoc  # imported lazily: only needed when regenerating

    protos = [str(PROTO_DIR / f"{name}.proto") for name in PROTO_NAMES]
    outputs = [f"--python_out={GEN_DIR}", f"--pyi_out={GEN_DIR}", f"--grpc_python_out={GEN_DIR}"]
    args = ["protoc", f"-I{PROTO_DIR}", *outputs, *protos]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed for {protos}")
    for path in GEN_DIR.glob("*_pb2_grpc.py"):
        text = path.read_text()
        text = _PB2_IMPORT.sub(r"from . import \1 as", text)
        path.write_text(text)

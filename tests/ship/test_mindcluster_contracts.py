"""The import-linter contract that keeps mindcluster's knowledge off the wire names every module.

``mindcluster.wire`` (generated protobuf/gRPC code) is the one part of ``mindcluster`` allowed to
import grpc; the contract "mindcluster's knowledge does not depend on the wire contract" lists the
stdlib-only modules by name, so a new module must be added there. This test says so when it is not.
"""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path

import mindcluster

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_every_stdlib_only_mindcluster_module_is_kept_off_the_wire() -> None:
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c.get("forbidden_modules") == ["mindcluster.wire"]]
    modules = {
        f"mindcluster.{info.name}"
        for info in pkgutil.iter_modules(mindcluster.__path__)
        if info.name != "wire"
    }
    assert set(contract["source_modules"]) == modules

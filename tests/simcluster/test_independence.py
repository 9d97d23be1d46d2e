"""The simulator is an independent oracle (issue #22 item 6): no module under ``simcluster/`` imports
the product (``apps``) or its Django project (``controlplane``).

Checked on the source with ``ast``, so imports inside functions and under ``if TYPE_CHECKING:`` count
too (import-linter's contract "The simulator never imports the product" checks the same graph).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.imports import imported_modules

SIMCLUSTER = Path(__file__).resolve().parents[2] / "simcluster"
PRODUCT = ("apps", "controlplane")


def _imported(path: Path, root: Path = SIMCLUSTER.parent) -> list[tuple[int, str]]:
    """(line, module) for every import statement anywhere in the file; relative ones resolved
    against the file's package under ``root``."""
    package = ".".join(path.relative_to(root).parent.parts)
    return imported_modules(ast.parse(path.read_text(), filename=str(path)), package)


def _is_product(module: str) -> bool:
    return any(module == root or module.startswith(f"{root}.") for root in PRODUCT)


def test_no_simulator_module_imports_the_product() -> None:
    files = sorted(SIMCLUSTER.rglob("*.py"))
    assert len(files) > 30, "the walk found the simulator"
    offences = [
        f"{path.relative_to(SIMCLUSTER.parent)}:{line} imports {module}"
        for path in files
        for line, module in _imported(path)
        if _is_product(module)
    ]
    assert offences == []


def test_the_check_sees_function_level_type_checking_and_relative_imports(tmp_path: Path) -> None:
    probe = tmp_path / "simcluster" / "kubeapi" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from apps.policies.spec import PolicySpec\n"
        "def late():\n    import controlplane.settings\n"
        "from ..kube import Kube\n"
    )
    modules = [module for _, module in _imported(probe, tmp_path)]
    assert "apps.policies.spec" in modules and "controlplane.settings" in modules
    assert "simcluster.kube" in modules

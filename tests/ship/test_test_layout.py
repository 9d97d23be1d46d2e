"""The tests stand alone (issue #14 item 5): shared helpers live in ``tests/support/``, conftest.py
files only hold fixtures and hooks, and nothing imports a conftest or another test module.

Importing a conftest makes pytest register its fixtures twice and ties one package to another's
setup; importing a test module re-collects or couples its tests. Both are checked statically here.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.imports import imported_modules

TESTS = Path(__file__).resolve().parents[1]


def _forbidden(module: str) -> str | None:
    """What ``module`` is if it must not be imported: a conftest or a test module under tests/."""
    path = TESTS.parent.joinpath(*module.split(".")).with_suffix(".py")
    if not path.is_file() or TESTS not in path.parents:
        return None
    if path.name == "conftest.py":
        return "a conftest"
    if path.name.startswith("test_"):
        return "another test module"
    return None


def _offences(path: Path) -> list[str]:
    relative = path.relative_to(TESTS.parent)
    package = ".".join(relative.parent.parts)
    tree = ast.parse(path.read_text(), filename=str(path))
    bad = []
    for line, module in imported_modules(tree, package, names=True):
        kind = _forbidden(module)
        if kind is not None:
            bad.append(f"{relative}:{line} imports {kind} ({module})")
    return bad


def test_no_module_imports_a_conftest_or_another_test_module() -> None:
    files = sorted(p for p in TESTS.rglob("*.py") if "fixtures" not in p.relative_to(TESTS).parts[:1])
    assert len(files) > 50, "the walk found the test tree"
    offences = [offence for path in files for offence in _offences(path)]
    assert offences == [], "move what is shared into tests/support/:\n" + "\n".join(offences)


def test_the_check_sees_each_kind_of_offence() -> None:
    """The checker itself: absolute, relative and module-style imports of conftests and test modules,
    and no false alarm on a helper whose name starts with ``test_``."""
    source = (
        "from tests.policies.push.conftest import live_job\n"
        "from .conftest import emulator\n"
        "from . import conftest\n"
        "import tests.browser.test_dashboard as dashboard\n"
        "from tests.events.test_websocket import world\n"
        "from tests.support.processes import test_database_url\n"
        "from tests.support.world import World\n"
    )
    found = {
        module: _forbidden(module)
        for _, module in imported_modules(ast.parse(source), "tests.simcluster", names=True)
    }
    flagged = {module: kind for module, kind in found.items() if kind}
    assert flagged == {
        "tests.policies.push.conftest": "a conftest",
        "tests.simcluster.conftest": "a conftest",
        "tests.browser.test_dashboard": "another test module",
        "tests.events.test_websocket": "another test module",
    }


# Suites named for what they prove rather than for one app (tests/README.md lists them).
CROSS_CUTTING = {"conformance", "security", "ship", "soak", "browser", "support", "fixtures"}


def test_the_tree_mirrors_the_product() -> None:
    """Every test folder is an app under apps/, the simulator, or a named cross-cutting suite, and
    the map in tests/README.md names each of them (issue #22 item 7)."""
    apps = {p.name for p in (TESTS.parent / "apps").iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert folders - apps - {"simcluster"} - CROSS_CUTTING == set()
    readme = (TESTS / "README.md").read_text()
    missing = sorted(name for name in folders - {"fixtures", "support"} - apps if f"`{name}/`" not in readme)
    assert missing == [], f"tests/README.md does not say what these folders hold: {missing}"

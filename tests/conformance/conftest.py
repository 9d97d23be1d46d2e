"""Print how many conformance scenarios ran and which MindCluster source lines they cover."""

from __future__ import annotations

from typing import Any

from tests.conformance.scenarios import SCENARIOS, sources


def pytest_terminal_summary(terminalreporter: Any) -> None:
    # The scenario checks only (not the loader's own tests beside them).
    checks = "tests/conformance/test_conformance.py"
    ran = [r for r in terminalreporter.stats.get("passed", []) if checks in r.nodeid]
    failed = [r for r in terminalreporter.stats.get("failed", []) if checks in r.nodeid]
    if not ran and not failed:
        return
    write = terminalreporter.write_line
    write("")
    write(
        f"MindCluster conformance: {len(SCENARIOS)} scenarios, {len(ran)} checks passed, "
        f"{len(failed)} failed; source lines covered ({len(sources())}):"
    )
    for src in sources():
        write(f"  {src}")

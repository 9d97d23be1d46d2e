"""``bench/run_all.py`` finishes and leaves no process behind, whatever a benchmark does (issue #27 item 5).

Stub benchmarks stand in for the real ones: one hangs (with a child started through ``_common.spawn``
and a careless one in a session of its own), one fails after starting a child, one exits leaving a
grandchild that holds its stdout. The runner's own output is captured through pipes, as
``bootstrap.py bench`` or CI would: a grandchild holding them would keep this test waiting.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"

PRELUDE = f"""
import subprocess, sys, time
sys.path.insert(0, {str(BENCH)!r})
from _common import emit, spawn
MARKER = sys.argv[1] if len(sys.argv) > 1 else "{{marker}}"
SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)", MARKER]
"""

STUBS = {
    # Hangs past the timeout: its spawned child must go with it (SIGTERM → SystemExit → atexit), and the
    # careless child it put in a session of its own is found by the runner (a subreaper) and killed.
    "hang": PRELUDE
    + """
spawn(SLEEPER)
subprocess.Popen(SLEEPER, start_new_session=True)
time.sleep(600)
""",
    # Fails: its spawned child goes at exit.
    "fail": PRELUDE
    + """
spawn(SLEEPER)
raise RuntimeError("deliberate failure")
""",
    # Succeeds, but leaves a grandchild holding the benchmark's stdout (no session of its own).
    "leak": PRELUDE
    + """
subprocess.Popen(SLEEPER)
emit({"bench": "leak", "value": 1})
""",
}


def marked(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if marker in (proc.info["cmdline"] or []):
            found.append(proc)
    return found


@pytest.mark.slow(seconds=15)
def test_run_all_reports_failures_and_leaves_no_process(tmp_path: Path) -> None:
    marker = f"bench-cleanup-{uuid.uuid4().hex}"
    for name, code in STUBS.items():
        (tmp_path / f"bench_{name}.py").write_text(code.replace("{marker}", marker))
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    reports = tmp_path / "reports"
    try:
        argv = [sys.executable, str(BENCH / "run_all.py"), "--bench-dir", str(tmp_path)]
        argv += ["--reports", str(reports), "--only", "hang,fail,leak", "--timeout", "3"]
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        results = {n: json.loads((reports / "latest" / f"{n}.json").read_text()) for n in STUBS}
        assert "timed out after 3 s" in results["hang"]["error"]
        assert results["hang"]["leftover_processes_killed"] == 1  # only the careless one
        assert "exit 1" in results["fail"]["error"]
        assert "deliberate failure" in results["fail"]["error"]
        assert "leftover_processes_killed" not in results["fail"]
        assert results["leak"]["value"] == 1
        assert results["leak"]["leftover_processes_killed"] == 1
        assert "| hang: timed out" in done.stdout  # the report names the failure and goes on
        assert marked(marker) == []
        assert {p.pid for p in psutil.Process().children(recursive=True)} <= before
    finally:
        for proc in marked(marker):  # never leave them to the next test, even when an assertion failed
            proc.kill()

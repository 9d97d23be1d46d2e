"""The heartbeat file and its exec probe (the worker's, beat's, ingester's and decider's liveness)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from apps.core import heartbeat as hb

REPO = Path(__file__).resolve().parents[2]


def probe(tmp_path: Path, name: str, max_age: float) -> subprocess.CompletedProcess[str]:
    """The exec probe exactly as the manifests run it, with the pod's /tmp emptyDir as $TMPDIR."""
    return subprocess.run(
        [sys.executable, "-m", "apps.core.heartbeat", "check", name, "--max-age", str(max_age)],
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.fixture
def tmpdir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(hb.tempfile, "tempdir", None)  # gettempdir() caches; re-read $TMPDIR
    return tmp_path


def test_no_heartbeat_yet_fails_the_probe(tmpdir_env: Path) -> None:
    result = probe(tmpdir_env, "worker", 60)
    assert result.returncode == 1 and "no heartbeat yet" in result.stderr


def test_a_fresh_beat_passes_and_a_stale_one_fails(tmpdir_env: Path) -> None:
    hb.Heartbeat("ingester").beat()
    assert (tmpdir_env / "recovery-ingester.heartbeat").exists()
    assert probe(tmpdir_env, "ingester", 60).returncode == 0
    old = time.time() - 120
    os.utime(tmpdir_env / "recovery-ingester.heartbeat", (old, old))
    stale = probe(tmpdir_env, "ingester", 60)
    assert stale.returncode == 1 and "ago" in stale.stderr


def test_beats_are_throttled(tmpdir_env: Path) -> None:
    beat = hb.Heartbeat("decider", every=3600)
    beat.beat()
    old = time.time() - 120
    os.utime(beat.path, (old, old))
    beat.beat()  # within `every`: not touched again
    assert (hb.heartbeat_age("decider") or 0) > 60


def test_the_probe_imports_no_django() -> None:
    code = "import sys, apps.core.heartbeat; print('django' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "False"

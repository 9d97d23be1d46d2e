"""The rendered overlays pass checkov's Kubernetes checks: no failed check, and every skip annotated in
the manifest with its reason (``checkov.io/skipN: CKV_ID=reason``; docs/operator-guide.md lists them).

checkov pins many packages of its own, so it lives in its own virtualenv: ``bootstrap.py test`` installs
it under ``var/tools/checkov`` and passes its path as ``$CHECKOV``; without one the test skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.deploy import DEPLOY, OVERLAYS, REPO, render_text


def checkov_binary() -> str:
    for candidate in (os.environ.get("CHECKOV"), str(REPO / "var" / "tools" / "checkov" / "bin" / "checkov")):
        if candidate and Path(candidate).is_file():
            return candidate
    found = shutil.which("checkov")
    if found is None:
        pytest.skip("checkov is not installed (bootstrap.py test installs it into var/tools/checkov)")
    return found


def checkov(path: Path) -> dict:
    result = subprocess.run(
        [checkov_binary(), "-f", str(path), "--framework", "kubernetes", "-o", "json", "--skip-download"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"},
    )
    assert result.stdout.strip(), result.stderr[-2000:]
    report = json.loads(result.stdout)
    return report[0] if isinstance(report, list) else report


def assert_clean(report: dict) -> None:
    results = report.get("results", {})
    failed = [f"{c['check_id']} {c['resource']}" for c in results.get("failed_checks", [])]
    assert failed == []
    for skipped in results.get("skipped_checks", []):
        reason = (skipped.get("check_result") or {}).get("suppress_comment", "")
        assert len(reason) > 20, f"{skipped['check_id']} on {skipped['resource']} is skipped without a reason"


@pytest.mark.slow(seconds=40)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_rendered_overlay_passes_checkov(overlay: str, tmp_path: Path) -> None:
    rendered = tmp_path / f"{overlay}.yaml"
    rendered.write_text(render_text(overlay))
    report = checkov(rendered)
    assert report.get("summary", {}).get("passed", 0) > 100
    assert_clean(report)


@pytest.mark.slow(seconds=20)
def test_the_ingress_example_passes_checkov() -> None:
    assert_clean(checkov(DEPLOY / "examples" / "ingress.yaml"))

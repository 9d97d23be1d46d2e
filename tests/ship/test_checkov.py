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


def checkov(paths: list[Path]) -> dict[str, dict]:
    """One checkov run over every file (its start-up is most of a run: one run of three files takes
    22 s, three runs 45 s); the report of each file, by file name."""
    files = [arg for path in paths for arg in ("-f", str(path))]
    result = subprocess.run(
        [checkov_binary(), *files, "--framework", "kubernetes", "-o", "json", "--skip-download"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"},
    )
    assert result.stdout.strip(), result.stderr[-2000:]
    report = json.loads(result.stdout)
    report = report[0] if isinstance(report, list) else report
    by_file: dict[str, dict] = {
        path.name: {"passed_checks": [], "failed_checks": [], "skipped_checks": []} for path in paths
    }
    for outcome, checks in report.get("results", {}).items():
        for check in checks:
            by_file[Path(check["file_path"]).name].setdefault(outcome, []).append(check)
    return by_file


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    rendered = tmp_path_factory.mktemp("checkov")
    paths = [rendered / f"{overlay}.yaml" for overlay in OVERLAYS]
    for overlay, path in zip(OVERLAYS, paths, strict=True):
        path.write_text(render_text(overlay))
    return checkov([*paths, DEPLOY / "examples" / "ingress.yaml"])


def assert_clean(results: dict) -> None:
    failed = [f"{c['check_id']} {c['resource']}" for c in results.get("failed_checks", [])]
    assert failed == []
    for skipped in results.get("skipped_checks", []):
        reason = (skipped.get("check_result") or {}).get("suppress_comment", "")
        assert len(reason) > 20, f"{skipped['check_id']} on {skipped['resource']} is skipped without a reason"


@pytest.mark.slow(seconds=25)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_rendered_overlay_passes_checkov(overlay: str, reports: dict[str, dict]) -> None:
    results = reports[f"{overlay}.yaml"]
    assert len(results["passed_checks"]) > 100
    assert_clean(results)


def test_the_ingress_example_passes_checkov(reports: dict[str, dict]) -> None:
    assert len(reports["ingress.yaml"]["passed_checks"]) > 0
    assert_clean(reports["ingress.yaml"])

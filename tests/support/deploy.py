"""The rendered deploy/ overlays, as the tests of tests/ship read them: ``kubectl kustomize`` output."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
OVERLAYS = ("production", "quickstart")
# The Kubernetes versions deploy/ claims (docs/operator-guide.md "Install"); kubectl of both ends renders.
CLAIMED_VERSIONS = ("1.27", "1.28", "1.29", "1.30", "1.31", "1.32", "1.33")
KUBECTL_DIR = Path("/usr/lib/google-cloud-sdk/bin")
# Commands that run until stopped (Deployments), as opposed to the migration Job's.
LONG_RUNNING = ("web", "worker", "beat", "ingester", "decider", "admission")

Doc = dict[str, Any]


def kubectl(version: str) -> Path:
    binary = KUBECTL_DIR / f"kubectl.{version}"
    if not binary.exists():
        pytest.skip(f"{binary} is not installed")
    return binary


@functools.cache
def _render_text(overlay: str, version: str) -> str:
    result = subprocess.run(
        [str(kubectl(version)), "kustomize", str(DEPLOY / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def render(overlay: str, version: str = "1.33") -> list[Doc]:
    """The overlay's objects as ``kubectl kustomize`` of that version renders them (fresh copies)."""
    return [doc for doc in yaml.safe_load_all(_render_text(overlay, version)) if doc]


def render_text(overlay: str, version: str = "1.33") -> str:
    return _render_text(overlay, version)


def of_kind(docs: list[Doc], kind: str) -> dict[str, Doc]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


def component(doc: Doc) -> str:
    return str(doc["metadata"]["labels"]["app.kubernetes.io/component"])


def workloads(docs: list[Doc]) -> dict[str, Doc]:
    """Our Deployments and the migration Job, by component (web, worker, ..., migrate)."""
    return {
        component(doc): doc
        for doc in docs
        if doc["kind"] in ("Deployment", "Job")
        and doc["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "recovery-control-plane"
    }


def pod_spec(doc: Doc) -> Doc:
    return dict(doc["spec"]["template"]["spec"])


def main_container(doc: Doc) -> Doc:
    return dict(pod_spec(doc)["containers"][0])

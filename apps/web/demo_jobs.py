"""Demo content: six AscendJobs of both frameworks and several releases, seeded by ``demo_setup``.

The product seeds them, into whatever cluster is the default one (``bootstrap.py run`` points it at
the simulated cluster): some carry a policy rendered by ``apps.policies.rendering.render``, some
none, and one is deliberately misconfigured (``dump`` without ``TTP_PORT``/``ttp-port`` on 7.3) so
its fallback shows in the Events. The base manifests ship in ``data/demo_jobs.yaml``.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from apps.cluster import client as kube
from apps.cluster.errors import ClusterError
from apps.policies.rendering import render
from apps.policies.spec import PolicySpec
from mindcluster import keys as k

log = logging.getLogger(__name__)
DATA_FILE = Path(__file__).resolve().parent / "data" / "demo_jobs.yaml"
DEMO_NAMESPACE = "default"


@dataclass(frozen=True)
class DemoJob:
    """One demo job: base shape, release, and either a policy to render or raw metadata."""

    name: str
    framework: str
    release: str
    policy: PolicySpec | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    note: str = ""


DEMO_JOBS: tuple[DemoJob, ...] = (
    DemoJob(
        "llama-pretrain",
        "pytorch",
        "26.1",
        PolicySpec(
            mindcluster_version="26.1",
            strategies=("retry", "recover", "dump"),
            pod_rescheduling=True,
            fault_retry_times=3,
        ),
        note="rendered 26.1 policy: retry first, recover, dying-gasp dump",
    ),
    DemoJob(
        "gpt-finetune",
        "pytorch",
        "7.3",
        PolicySpec(mindcluster_version="7.3", strategies=("recover", "recover-in-place")),
        note="rendered 7.3 policy: in-place recovery for business faults",
    ),
    DemoJob(
        "qwen-platform",
        "pytorch",
        "26.1",
        PolicySpec(mindcluster_version="26.1", strategies=("retry", "recover", "dump"), platform_mode=True),
        note="platform mode: ClusterD asks the control plane which strategy to use",
    ),
    DemoJob(
        "mindformers-pretrain",
        "mindspore",
        "7.2",
        PolicySpec(mindcluster_version="7.2", strategies=("recover", "dump")),
        note="rendered 7.2 MindSpore policy",
    ),
    DemoJob(
        "plain-resnet",
        "pytorch",
        "26.1",
        None,
        labels={k.LABEL_FAULT_SCHEDULING: "force", k.LABEL_POD_RESCHEDULING: "on"},
        note="no recovery policy: Pod-level rescheduling only",
    ),
    DemoJob(
        "broken-dump",
        "pytorch",
        "7.3",
        None,
        labels={k.LABEL_FAULT_SCHEDULING: "grace"},
        annotations={k.ANNOTATION_RECOVER_STRATEGY: "dump"},
        note="misconfigured: dump without TTP_PORT/ttp-port, so TaskD supports only exit",
    ),
)


def load_bases() -> dict[str, dict[str, Any]]:
    """The base manifests per framework from the packaged YAML."""
    with DATA_FILE.open() as fh:
        data = yaml.safe_load(fh)
    return {name: copy.deepcopy(doc) for name, doc in data.items()}


def build_demo_manifests() -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """(AscendJob manifest, optional taskd-manager ConfigMap) for every demo job."""
    bases = load_bases()
    out: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    for demo in DEMO_JOBS:
        manifest = copy.deepcopy(bases[demo.framework])
        meta = manifest["metadata"]
        meta["name"] = demo.name
        meta["namespace"] = DEMO_NAMESPACE
        meta["labels"] = {**meta.get("labels", {}), **demo.labels, k.LABEL_RELEASE: demo.release}
        meta["annotations"] = {
            **meta.get("annotations", {}),
            **demo.annotations,
            "recovery.mindcluster.io/demo-note": demo.note,
        }
        configmap = None
        if demo.policy is not None:
            manifest, configmap = _render(manifest, demo.policy)
        out.append((manifest, configmap))
    return out


def _render(manifest: dict[str, Any], spec: PolicySpec) -> tuple[dict[str, Any], dict[str, Any] | None]:
    try:
        result = render(manifest, spec)
    except Exception:  # the demo must still come up if rendering rejects the job
        log.exception(
            "rendering the demo policy for %s failed; seeding it unrendered", manifest["metadata"]["name"]
        )
        return manifest, None
    return result.manifest, result.configmap


def seed_demo_jobs(ref: kube.ClusterRef) -> list[str]:
    """Create the demo jobs (and their ConfigMaps) unless they exist; returns the job names created."""
    created: list[str] = []
    for manifest, configmap in build_demo_manifests():
        namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        if configmap is not None:
            _upsert_configmap(ref, configmap.get("metadata", {}).get("namespace") or namespace, configmap)
        try:
            kube.create_ascendjob(ref, namespace, manifest)
        except ClusterError as exc:
            if not exc.conflict:
                raise
            continue
        created.append(name)
    return created


def _upsert_configmap(ref: kube.ClusterRef, namespace: str, configmap: dict[str, Any]) -> None:
    metadata = {**configmap.get("metadata", {}), "namespace": namespace}
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {str(key): str(v) for key, v in (configmap.get("data") or {}).items()},
    }
    try:
        kube.create_configmap(ref, namespace, body)
    except ClusterError as exc:
        if not exc.conflict:
            raise
        kube.replace_configmap(ref, namespace, metadata["name"], body)

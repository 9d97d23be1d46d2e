"""The shipping files are valid: docker-compose.yml for Compose, deploy/ for Kubernetes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
K8S_VERSION = "1.30.0"


def deploy_documents() -> list[tuple[str, dict]]:
    docs = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs.append((path.name, doc))
    return docs


@pytest.mark.parametrize(
    ("filename", "doc"), deploy_documents(), ids=lambda v: v if isinstance(v, str) else v["kind"]
)
def test_each_manifest_validates_against_the_kubernetes_schema(filename: str, doc: dict) -> None:
    import kubernetes_validate

    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_kustomization_lists_every_manifest() -> None:
    listed = set(yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"])
    assert listed == {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}


def test_the_role_grants_only_what_the_code_uses() -> None:
    role = next(doc for _, doc in deploy_documents() if doc["kind"] == "ClusterRole")
    granted = {
        (rule["apiGroups"][0], resource): set(rule["verbs"])
        for rule in role["rules"]
        for resource in rule["resources"]
    }
    assert granted == {
        ("mindxdl.gitee.com", "ascendjobs"): {"get", "list", "watch", "patch"},
        ("scheduling.volcano.sh", "podgroups"): {"get", "list", "watch", "patch"},
        ("", "configmaps"): {"get", "list", "watch", "create", "update", "delete"},
        ("", "events"): {"get", "list", "watch"},
    }
    assert all("*" not in verbs for verbs in granted.values())


def test_every_process_has_a_deployment_with_settings_from_configmap_and_secret() -> None:
    deployments = {
        doc["metadata"]["name"]: doc for _, doc in deploy_documents() if doc["kind"] == "Deployment"
    }
    assert set(deployments) == {f"recovery-{n}" for n in ("web", "worker", "beat", "ingester", "decider")}
    for deployment in deployments.values():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == "recovery-control-plane"
        sources = pod["containers"][0]["envFrom"]
        assert {"configMapRef", "secretRef"} == {key for source in sources for key in source}


def test_docker_compose_file_is_valid() -> None:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.skip("docker-compose (Debian package docker-compose) is not installed; .ci/run installs it")
    result = subprocess.run(
        [binary, "-f", str(REPO / "docker-compose.yml"), "config", "-q"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr


def test_docker_compose_runs_every_process_with_health_checks() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "web", "worker", "beat", "ingester", "simcluster"} <= set(services)
    for name in ("postgres", "redis", "web", "worker", "simcluster"):
        assert "healthcheck" in services[name], name
    assert {"pgdata", "redisdata", "kube"} <= set(compose["volumes"])

"""``deploy/admission/``: valid Kubernetes objects, and the webhook matches what register_webhook sends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from apps.admission.webhook_config import MANAGED_LABEL, webhook_configuration

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "admission"
K8S_VERSION = "1.31"


def documents() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            out.extend((path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc)
    return out


@pytest.mark.parametrize(
    ("filename", "doc"), documents(), ids=lambda v: v if isinstance(v, str) else v["kind"]
)
def test_built_in_kinds_validate_against_the_kubernetes_schema(filename: str, doc: dict[str, Any]) -> None:
    import kubernetes_validate

    if doc["apiVersion"].startswith("cert-manager.io/"):
        assert doc["kind"] in ("Issuer", "Certificate")  # a CRD: not in the built-in schema
        return
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_kustomization_lists_every_file() -> None:
    listed = set(yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"])
    assert listed == {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}


def test_webhook_yaml_is_the_registered_configuration_with_a_service_and_tls() -> None:
    doc = yaml.safe_load((DEPLOY / "webhook.yaml").read_text())
    hook = doc["webhooks"][0]
    expected = webhook_configuration(hook["clientConfig"])
    doc["metadata"].pop("annotations")
    assert doc == expected
    assert (
        hook["failurePolicy"] == "Ignore"
        and hook["timeoutSeconds"] == 2
        and hook["sideEffects"] == "NoneOnDryRun"
    )
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["namespaceSelector"] == {"matchLabels": {MANAGED_LABEL: "true"}}
    service = hook["clientConfig"]["service"]
    assert (service["name"], service["port"], service["path"]) == (
        "recovery-admission",
        443,
        "/admission/ascendjobs/",
    )
    names = next(
        d
        for n, d in documents()
        if d["kind"] == "Certificate" and d["metadata"]["name"] == "recovery-admission"
    )
    assert f"{service['name']}.{service['namespace']}.svc" in names["spec"]["dnsNames"]

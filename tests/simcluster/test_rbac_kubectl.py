"""Issue 23 item 1 through kubectl 1.27 (JSON bodies) and 1.33 (protobuf bodies): ``kubectl
create token``, ``kubectl apply`` of RBAC objects, ``kubectl auth can-i`` (a SelfSubjectAccessReview)
and ``--list`` (a SelfSubjectRulesReview) as a ServiceAccount, and the identities of deploy/'s
production overlay granting exactly the verbs they list. kubectl 1.33 sends the TokenRequest and
the reviews as protobuf (``simcluster/kubeapi/protobuf.py`` decodes them).

kubectl sends a kubeconfig's token only over TLS (client-go tools/clientcmd/client_config.go
``ClientConfig``, gated on ``IsConfigTransportTLS``): ServiceAccount kubeconfigs name the
emulator's HTTPS port.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from simcluster.kubeapi import KubeApiEmulator
from tests.support.deploy import render
from tests.support.kube_identity import service_account_kubeconfig
from tests.support.sim import make_job

KUBECTL_DIR = Path("/usr/lib/google-cloud-sdk/bin")
KUBECTL = KUBECTL_DIR / "kubectl.1.27"
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


@pytest.fixture(autouse=True, params=["1.27", "1.33"])
def kubectl_version(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with the oldest and the newest kubectl we claim."""
    binary = KUBECTL_DIR / f"kubectl.{request.param}"
    if not binary.exists():
        pytest.skip(f"{binary} is not installed")
    monkeypatch.setattr(sys.modules[__name__], "KUBECTL", binary)
    return str(request.param)


def kubectl(kubeconfig: Path, *args: str, ok: bool | None = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}
    proc = subprocess.run(
        [str(KUBECTL), *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    if ok is not None:
        assert (proc.returncode == 0) == ok, f"kubectl {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def can_i(kubeconfig: Path, verb: str, resource: str, ns: str) -> str:
    proc = kubectl(kubeconfig, "auth", "can-i", verb, resource, "-n", ns, ok=None)
    answer = proc.stdout.strip()
    # kubectl exits 0 for yes and 1 for no (cmd/auth/cani.go).
    assert (answer, proc.returncode) in (("yes", 0), ("no", 1)), proc.stderr
    return answer


@pytest.mark.slow(seconds=10)
def test_create_token_apply_a_role_and_can_i_follow_the_grant(
    emulator: KubeApiEmulator, kubeconfig: Path, ns: str, tmp_path: Path
) -> None:
    kubectl(kubeconfig, "create", "serviceaccount", "robot", "-n", ns)
    token = kubectl(kubeconfig, "create", "token", "robot", "-n", ns, "--duration=20m").stdout.strip()
    robot = emulator.write_kubeconfig(tmp_path / "robot" / "config", token=token, namespace=ns)
    assert can_i(robot, "create", "ascendjobs", ns) == "no"
    assert can_i(robot, "get", "ascendjobs", ns) == "no"

    grant = tmp_path / "grant.yaml"
    grant.write_text(
        yaml.safe_dump_all(
            [
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "Role",
                    "metadata": {"name": "jobs", "namespace": ns},
                    "rules": [
                        {
                            "apiGroups": ["mindxdl.gitee.com"],
                            "resources": ["ascendjobs"],
                            "verbs": ["get", "list", "watch", "patch"],
                        }
                    ],
                },
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {"name": "jobs", "namespace": ns},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "jobs"},
                    "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": ns}],
                },
            ]
        )
    )
    assert "created" in kubectl(kubeconfig, "apply", "-f", str(grant)).stdout  # validated apply
    for verb, expected in (("watch", "yes"), ("patch", "yes"), ("create", "no"), ("delete", "no")):
        assert can_i(robot, verb, "ascendjobs", ns) == expected, verb
    assert can_i(robot, "get", "ascendjobs", "default") == "no"  # the RoleBinding's namespace only
    listing = kubectl(robot, "auth", "can-i", "--list", "-n", ns).stdout
    row = next(line for line in listing.splitlines() if line.startswith("ascendjobs.mindxdl.gitee.com"))
    assert row.split()[-4:] == ["[get", "list", "watch", "patch]"]

    job = tmp_path / "job.yaml"
    manifest = make_job("j", workers=1)
    manifest["metadata"]["namespace"] = ns
    job.write_text(yaml.safe_dump(manifest))
    refused = kubectl(robot, "create", "-f", str(job), ok=False)
    assert (
        f'ascendjobs.mindxdl.gitee.com is forbidden: User "system:serviceaccount:{ns}:robot" cannot create '
        f'resource "ascendjobs" in API group "mindxdl.gitee.com" in the namespace "{ns}"'
    ) in refused.stderr
    kubectl(kubeconfig, "create", "-f", str(job))
    assert (
        kubectl(robot, "get", "ascendjobs", "j", "-o", "name").stdout.strip()
        == "ascendjob.mindxdl.gitee.com/j"
    )


def _grants(rbac_docs: list[dict[str, Any]]) -> dict[tuple[str, str], list[tuple[str, dict[str, Any]]]]:
    """(SA namespace, SA name) → [(namespace the rule applies in or "" for all, rule)] from the YAML."""
    roles = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in rbac_docs}
    out: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
    for doc in rbac_docs:
        if doc["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        scope = doc["metadata"].get("namespace", "") if doc["kind"] == "RoleBinding" else ""
        ref = doc["roleRef"]
        role = roles[(ref["kind"], scope if ref["kind"] == "Role" else "", ref["name"])]
        for subject in doc.get("subjects") or []:
            if subject["kind"] == "ServiceAccount":
                key = (subject.get("namespace") or scope, subject["name"])
                out.setdefault(key, []).extend((scope, rule) for rule in role.get("rules") or [])
    return out


def _granted(
    rules: list[tuple[str, dict[str, Any]]], verb: str, scope: str, group: str, resource: str
) -> bool:
    """What the YAML says, read literally (no wildcards in deploy/): the test's own expectation."""
    return any(
        (not rule_scope or rule_scope == scope)
        and not rule.get("resourceNames")
        and verb in rule.get("verbs", [])
        and group in rule.get("apiGroups", [])
        and resource in rule.get("resources", [])
        for rule_scope, rule in rules
    )


@pytest.mark.slow(seconds=6)
def test_deploy_rbac_grants_exactly_what_it_lists(kubeconfig: Path, tmp_path: Path) -> None:
    # The production overlay as kubectl renders it; its identities only (the rest is the rehearsal's).
    identity_kinds = (
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "Role",
        "ClusterRoleBinding",
        "RoleBinding",
    )
    docs = [d for d in render("production") if d["kind"] in identity_kinds]
    manifest = tmp_path / "identities.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    # The managed namespace is the team's own, not deploy/'s: it exists before the install.
    kubectl(kubeconfig, "create", "namespace", "team-a", ok=None)
    kubectl(kubeconfig, "apply", "-f", str(manifest))
    grants = _grants([d for d in docs if d["kind"] not in ("Namespace", "ServiceAccount")])
    assert grants, "deploy/ binds no ServiceAccount"
    for (sa_ns, sa_name), rules in grants.items():
        kc = service_account_kubeconfig(
            kubeconfig, sa_ns, sa_name, tmp_path / f"{sa_ns}-{sa_name}" / "config"
        )
        checks = {
            (scope or "team-a", group, resource)
            for scope, rule in rules
            if not rule.get("resourceNames")
            for group in rule.get("apiGroups") or []
            for resource in rule.get("resources") or []
        }

        # Every verb on every granted resource through a SelfSubjectAccessReview as the ServiceAccount...
        api = config.new_client_from_config(config_file=str(kc))
        try:
            reviews = client.AuthorizationV1Api(api)
            for scope, group, resource in sorted(checks):
                for verb in VERBS:
                    attrs = {"namespace": scope, "verb": verb, "group": group, "resource": resource}
                    answer = reviews.create_self_subject_access_review(
                        {"spec": {"resourceAttributes": attrs}}
                    )
                    assert answer.status.allowed is _granted(rules, verb, scope, group, resource), attrs
        finally:
            api.close()
        # ...and the issue's own question through kubectl.
        expected = "yes" if _granted(rules, "create", "team-a", "mindxdl.gitee.com", "ascendjobs") else "no"
        assert can_i(kc, "create", "ascendjobs", "team-a") == expected
        assert can_i(kc, "create", "namespaces", "team-a") == "no"

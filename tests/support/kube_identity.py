"""Identities in a Kubernetes cluster for tests: a ServiceAccount's token and a kubeconfig for it.

Works against any cluster the admin kubeconfig reaches (the built-in one, or a real one): the token
comes from the TokenRequest API (``POST .../serviceaccounts/NAME/token``, what ``kubectl create
token`` calls), so whatever the ServiceAccount's RBAC grants is all the kubeconfig can do::

    kc = service_account_kubeconfig(admin_kc, "mindcluster-recovery", "recovery-control-plane",
                                    tmp_path / "sa.kubeconfig")
    subprocess.run(["kubectl", "--kubeconfig", str(kc), "auth", "can-i", "create", "ascendjobs"])
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import yaml
from kubernetes import client, config

from simcluster.kubeapi import ADMIN_TOKEN, SECURE_SERVER_EXTENSION, write_token_kubeconfig

# For raw HTTP requests to the built-in cluster as its cluster-admin (what the admin kubeconfig sends).
ADMIN_HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def service_account_token(
    admin_kubeconfig: str | Path,
    namespace: str,
    name: str,
    *,
    expiration_seconds: int = 3600,
    create: bool = False,
) -> str:
    """A fresh bearer token for ServiceAccount ``namespace/name`` (created first when ``create``)."""
    api = config.new_client_from_config(config_file=str(admin_kubeconfig))
    try:
        core = client.CoreV1Api(api)
        if create:
            with contextlib.suppress(client.ApiException):  # 409: the namespace already exists
                core.create_namespace({"metadata": {"name": namespace}})
            with contextlib.suppress(client.ApiException):
                core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
        answer = core.create_namespaced_service_account_token(
            name, namespace, {"spec": {"expirationSeconds": expiration_seconds}}
        )
        return str(answer.status.token)
    finally:
        api.close()


def service_account_kubeconfig(
    admin_kubeconfig: str | Path,
    namespace: str,
    name: str,
    path: str | Path,
    *,
    expiration_seconds: int = 3600,
    create: bool = False,
) -> Path:
    """Write a kubeconfig at ``path`` for the cluster of ``admin_kubeconfig`` whose user is the
    ServiceAccount (its current namespace is the ServiceAccount's), usable by kubectl and by the
    Python client alike."""
    token = service_account_token(
        admin_kubeconfig, namespace, name, expiration_seconds=expiration_seconds, create=create
    )
    server, ca_data = _secure_server(admin_kubeconfig)
    return write_token_kubeconfig(
        path, server, token, context=f"{namespace}-{name}", namespace=namespace, ca_data=ca_data
    )


def _secure_server(kubeconfig: str | Path) -> tuple[str, str]:
    """(server, CA data) to reach the current context's cluster over TLS: the built-in cluster's
    HTTPS port when the kubeconfig records one (kubectl sends tokens over TLS only), else the
    cluster as configured."""
    doc = yaml.safe_load(Path(kubeconfig).read_text())
    current = next(c for c in doc["contexts"] if c["name"] == doc["current-context"])
    cluster = next(c for c in doc["clusters"] if c["name"] == current["context"]["cluster"])["cluster"]
    for extension in cluster.get("extensions") or []:
        if extension.get("name") == SECURE_SERVER_EXTENSION:
            secure = extension["extension"]
            return str(secure["server"]), str(secure["certificate-authority-data"])
    return str(cluster["server"]), str(cluster.get("certificate-authority-data") or "")

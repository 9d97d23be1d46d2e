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

from simcluster.kubeapi import ADMIN_TOKEN, write_token_kubeconfig

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
    """Write a kubeconfig at ``path`` for the same server as ``admin_kubeconfig`` whose user is the
    ServiceAccount (its current namespace is the ServiceAccount's)."""
    token = service_account_token(
        admin_kubeconfig, namespace, name, expiration_seconds=expiration_seconds, create=create
    )
    admin = yaml.safe_load(Path(admin_kubeconfig).read_text())
    current = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])
    cluster = next(c for c in admin["clusters"] if c["name"] == current["context"]["cluster"])
    return write_token_kubeconfig(
        path, cluster["cluster"]["server"], token, context=f"{namespace}-{name}", namespace=namespace
    )

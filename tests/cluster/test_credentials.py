"""Which credentials a process calls the cluster with (``apps.cluster.client.load_credentials``).

The local cluster's row (the one the ingester registers in a pod) means "this process's own
identity": the pod's mounted ServiceAccount token when ``KUBERNETES_SERVICE_HOST`` is set (client-go
rest.InClusterConfig reads the same variable and files), else the process's ``KUBECONFIG``. A row with
a kubeconfig path (a remote cluster) is that file, whoever reads it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from django.test import override_settings
from kubernetes import client as k8s
from kubernetes.config import incluster_config

from apps.cluster.client import ClusterRef, load_credentials
from apps.jobs.clusters import cluster_ref, cluster_register_default


def kubeconfig(path: Path, server: str, token: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


def loaded(ref: ClusterRef) -> k8s.Configuration:
    configuration = k8s.Configuration()
    load_credentials(ref, configuration)
    return configuration


def test_a_named_kubeconfig_is_that_file_whatever_the_process_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = kubeconfig(tmp_path / "own", "https://own.example:6443", "own-token")
    remote = kubeconfig(tmp_path / "remote", "https://remote.example:6443", "remote-token")
    monkeypatch.setenv("KUBECONFIG", str(own))
    configuration = loaded(ClusterRef(name="remote", kubeconfig_path=str(remote)))
    assert configuration.host == "https://remote.example:6443"
    assert configuration.api_key["BearerToken"] == "Bearer remote-token"


def test_the_local_cluster_outside_a_pod_is_the_processs_own_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "web", "https://api.local:6443", "web-sa")))
    configuration = loaded(ClusterRef(name="default", in_cluster=True))
    assert configuration.api_key["BearerToken"] == "Bearer web-sa"
    # An empty path means the same: the process's own.
    assert loaded(ClusterRef(name="default")).api_key["BearerToken"] == "Bearer web-sa"


def test_the_local_cluster_in_a_pod_is_the_mounted_service_account_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "token").write_text("mounted-token")
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")  # only read by path
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(tmp_path / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    # A KUBECONFIG in the pod's environment does not win over the pod's own identity.
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "other", "https://x:1", "other")))
    configuration = loaded(ClusterRef(name="default", in_cluster=True))
    assert configuration.host == "https://10.96.0.1:443"
    assert (
        configuration.api_key["BearerToken"].lower() == "bearer mounted-token"
    )  # the client writes "bearer"


@pytest.mark.django_db
def test_a_pod_registers_the_local_cluster_not_its_own_kubeconfig_path(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "ingester", "https://api.local:6443", "ingester-sa")
    with override_settings(KUBE_IN_CLUSTER=True, KUBECONFIG=str(path)):
        cluster = cluster_register_default()
    assert cluster is not None
    assert cluster_ref(cluster) == ClusterRef(name="default", in_cluster=True)
    # Registered from a kubeconfig (the dev setup), the row is that file again.
    with override_settings(KUBE_IN_CLUSTER=False, KUBECONFIG=str(path)):
        cluster = cluster_register_default()
    assert cluster is not None and not cluster.in_cluster and cluster.kubeconfig_path == str(path)

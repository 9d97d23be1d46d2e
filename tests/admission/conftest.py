"""The webhook as the API server reaches it: served over TLS by ``apps.admission.serving``, with the
built-in cluster presenting its client certificate (``SIMCLUSTER_ADMISSION_CONFIG``)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apps.admission.services import namespace_default_set
from apps.admission.serving import AdmissionServer
from apps.admission.tls import ReloadingServerContext
from apps.admission.webhook_config import MANAGED_LABEL
from apps.audit.actors import Actor
from apps.jobs.models import Cluster
from simcluster.kube import Kube
from simcluster.kubeapi.admission import ADMISSION_CONFIG_ENV
from simcluster.runtime import SimCluster
from tests.support.admission import DEFAULT_SPEC, register
from tests.support.admission_tls import AdmissionTls


@pytest.fixture(scope="session")
def admission_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdmissionTls]:
    tls = AdmissionTls.make(Path(tmp_path_factory.mktemp("admission-tls")))
    before = os.environ.get(ADMISSION_CONFIG_ENV)
    os.environ[ADMISSION_CONFIG_ENV] = str(tls.admission_config)
    yield tls
    if before is None:
        os.environ.pop(ADMISSION_CONFIG_ENV, None)
    else:
        os.environ[ADMISSION_CONFIG_ENV] = before


@pytest.fixture(scope="module")
def admission_server(admission_tls: AdmissionTls) -> Iterator[AdmissionServer]:
    from controlplane.asgi import application

    certs = admission_tls.certs
    server = AdmissionServer(
        application, ReloadingServerContext(certs.server.cert, certs.server.key, certs.client_ca.cert)
    )
    yield server
    server.stop()


@pytest.fixture
def webhook_url(admission_server: AdmissionServer, settings: Any) -> str:
    """The admission server's base URL, this test's Django serving the webhook's URLconf (what
    ``ADMISSION_WEBHOOK=true`` selects at start-up)."""
    settings.ADMISSION_WEBHOOK = True
    settings.ROOT_URLCONF = "controlplane.admission_urls"
    return admission_server.url


@pytest.fixture
def admission_world(
    sim: SimCluster, kube: Kube, webhook_url: str, admission_tls: AdmissionTls
) -> dict[str, Any]:
    """Cluster ``sim`` (the default), a managed namespace with a default policy, our webhook registered
    in the built-in cluster over TLS."""
    cluster = Cluster.objects.create(name="sim", kubeconfig_path=sim.kubeconfig_path, is_default=True)
    namespace = f"managed-{uuid.uuid4().hex[:6]}"
    # 10 s, not production's 2 s: these tests are about what is recorded, on a machine that may be
    # loaded; the timeout itself is tested with a hung webhook (test_admission_e2e.py).
    register(webhook_url, admission_tls, "--manage-namespace", namespace, "--timeout", "10")
    assert kube.core.read_namespace(namespace).metadata.labels[MANAGED_LABEL] == "true"
    namespace_default_set(cluster=cluster, namespace=namespace, spec=DEFAULT_SPEC, actor=Actor(name="test"))
    return {"cluster": cluster, "namespace": namespace, "url": webhook_url, "tls": admission_tls}

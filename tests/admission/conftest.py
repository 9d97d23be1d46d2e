"""The webhook as the API server reaches it: served over TLS by ``apps.admission.serving``, with the
built-in cluster presenting its client certificate (``SIMCLUSTER_ADMISSION_CONFIG``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apps.admission.serving import AdmissionServer
from apps.admission.tls import ReloadingServerContext
from simcluster.kubeapi.admission import ADMISSION_CONFIG_ENV
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

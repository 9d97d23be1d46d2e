"""The admission webhook served as in production, for tests: HTTPS requiring a client certificate.

``AdmissionTls`` makes the certificates (``apps.admission.devcerts``) and the simulator's
``AdmissionConfiguration`` (its kubeconfig names the client certificate the built-in cluster
presents, as a real API server's does); ``post_review`` is a caller of our own choosing (the API
server's certificate, another CA's, or none).
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from apps.admission.devcerts import (
    DevCertificates,
    Issued,
    issue,
    make_ca,
    make_dev_certificates,
    write_admission_config,
)


@dataclass(frozen=True)
class AdmissionTls:
    certs: DevCertificates
    foreign_client: Issued  # a client certificate from a CA the webhook does not trust
    admission_config: Path  # the API server's AdmissionConfiguration (SIMCLUSTER_ADMISSION_CONFIG)

    @classmethod
    def make(cls, directory: Path) -> AdmissionTls:
        certs = make_dev_certificates(directory)
        _, other_cert, other_key = make_ca(directory / "other", "ca", "someone-else-ca")
        foreign = issue(directory / "other", "client", "kube-apiserver-admission", (other_cert, other_key))
        config = write_admission_config(directory, certs.client)
        return cls(certs=certs, foreign_client=foreign, admission_config=config)


def post_review(
    url: str, body: bytes | dict[str, Any], *, server_ca: Path, client: Issued | None, path: str = ""
) -> tuple[int, Any]:
    """POST to the webhook over TLS as ``client``; the status and JSON answer (a refused handshake
    raises ``ssl.SSLError`` or ``ConnectionError``)."""
    parts = urlsplit(url)
    context = ssl.create_default_context(cafile=str(server_ca))
    if client is not None:
        context.load_cert_chain(str(client.cert), str(client.key))
    conn = http.client.HTTPSConnection(parts.hostname or "", parts.port, context=context, timeout=30)
    try:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn.request(
            "POST", path or "/admission/ascendjobs/", data, headers={"Content-Type": "application/json"}
        )
        response = conn.getresponse()
        raw = response.read()
        try:
            return response.status, json.loads(raw)
        except ValueError:
            return response.status, raw
    finally:
        conn.close()


def served_certificate(url: str, server_ca: Path, client: Issued) -> bytes:
    """The DER certificate the server presents now (a new connection)."""
    parts = urlsplit(url)
    context = ssl.create_default_context(cafile=str(server_ca))
    context.load_cert_chain(str(client.cert), str(client.key))
    with (
        socket.create_connection((parts.hostname, parts.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=parts.hostname) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
        assert der is not None
        return der

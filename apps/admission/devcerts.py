"""Certificates for a local run and the tests: a serving CA and cert, a client CA and cert.

What cert-manager makes in a real cluster (``deploy/admission/certificate.yaml``), made here with
``cryptography`` so ``bootstrap.py run`` and the tests serve the webhook the same way production
does: HTTPS, and only to a caller presenting a certificate from the client CA.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path


@dataclass(frozen=True)
class DevCertificates:
    """``server_ca`` signs ``server`` (goes in the webhook's caBundle); ``client_ca`` signs ``client``
    (the API server's certificate; ``ADMISSION_CLIENT_CA_FILE``)."""

    server_ca: Issued
    server: Issued
    client_ca: Issued
    client: Issued


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(directory: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Issued:
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
    key_path.touch(mode=0o600)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return Issued(cert_path, key_path)


def _build(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    *,
    usage: x509.ObjectIdentifier | None,
    hosts: tuple[str, ...] = (),
    days: int = 30,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name = issuer[0].subject if issuer else _name(subject)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=usage is None, path_length=None), critical=True)
    )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if hosts:
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256())


def make_ca(
    directory: Path, stem: str, common_name: str
) -> tuple[Issued, x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _build(common_name, key, None, usage=None, days=365)
    return _write(directory, stem, cert, key), cert, key


def issue(
    directory: Path,
    stem: str,
    common_name: str,
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    *,
    server_hosts: tuple[str, ...] = (),
) -> Issued:
    """A leaf signed by ``ca``: a serving certificate for ``server_hosts``, else a client certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server_hosts else ExtendedKeyUsageOID.CLIENT_AUTH
    return _write(directory, stem, _build(common_name, key, ca, usage=usage, hosts=server_hosts), key)


def make_dev_certificates(
    directory: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")
) -> DevCertificates:
    server_ca, server_ca_cert, server_ca_key = make_ca(directory, "server-ca", "recovery-admission-ca")
    client_ca, client_ca_cert, client_ca_key = make_ca(directory, "client-ca", "recovery-admission-client-ca")
    return DevCertificates(
        server_ca=server_ca,
        server=issue(
            directory, "server", "recovery-admission", (server_ca_cert, server_ca_key), server_hosts=hosts
        ),
        client_ca=client_ca,
        client=issue(directory, "client", "kube-apiserver-admission", (client_ca_cert, client_ca_key)),
    )


def write_admission_config(directory: Path, client: Issued, host: str = "*") -> Path:
    """The API server's ``AdmissionConfiguration`` and the kubeconfig it names, presenting ``client``
    to the webhooks at ``host`` (a kubeconfig user name: ``*`` every webhook, or a service's
    ``name.namespace.svc``); what ``SIMCLUSTER_ADMISSION_CONFIG`` points the built-in cluster at
    (``deploy/admission/README.md`` shows the same two files for a real API server)."""
    kubeconfig = directory / "admission-kubeconfig.yaml"
    user = {"client-certificate": str(client.cert.resolve()), "client-key": str(client.key.resolve())}
    kubeconfig.write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "users": [{"name": host, "user": user}]})
    )
    config = directory / "admission-config.yaml"
    plugin = {
        "name": "MutatingAdmissionWebhook",
        "configuration": {
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "WebhookAdmissionConfiguration",
            "kubeConfigFile": kubeconfig.name,
        },
    }
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "apiserver.config.k8s.io/v1",
                "kind": "AdmissionConfiguration",
                "plugins": [plugin],
            }
        )
    )
    return config

"""The admission webhook in the deploy rehearsal: what cert-manager and the endpoints controller do in a
real cluster, done by the rehearsal, and nothing else.

- **cert-manager** (``deploy/admission/certificate.yaml``) issues each ``Certificate`` into its
  ``secretName`` (``tls.crt``, ``tls.key``, ``ca.crt``, type ``kubernetes.io/tls``), and its CA
  injector copies the ``ca.crt`` of the Certificate named by the webhook configuration's
  ``cert-manager.io/inject-ca-from`` into ``caBundle``. The built-in cluster has no cert-manager, so
  :func:`issue_certificates` makes the certificates (``apps.admission.devcerts``), creates each
  rendered Certificate's Secret with kubectl, and :func:`inject_ca_bundle` patches the caBundle, the
  operator guide's path without cert-manager.
- **The API server's side**: its AdmissionConfiguration names the client certificate (the Secret
  ``recovery-admission-apiserver-client`` copied to the control-plane nodes) for the webhook's
  service host (``deploy/admission/README.md``); :class:`AdmissionPki` writes it for the rehearsal's
  SimCluster.
- **The endpoints controller** lists a Ready pod under every Service selecting it; the built-in
  cluster resolves the webhook's ``clientConfig.service`` through that ``Endpoints`` object
  (``simcluster/kubeapi/admission.py``). :func:`endpoints_for` is what it would write.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from apps.admission.devcerts import DevCertificates, Issued, make_dev_certificates, write_admission_config
from tests.support.deploy import Doc, of_kind
from tests.support.rehearsal import Pod

NAMESPACE = "mindcluster-recovery"
SERVICE_HOST = f"recovery-admission.{NAMESPACE}.svc"  # client.go: the name the API server dials
INJECT_CA_FROM = "cert-manager.io/inject-ca-from"
# kube-proxy and the pod network are not here: a pod's ports are this machine's (tests/support/rehearsal.py).
POD_ADDRESS = "127.0.0.1"

Run = Callable[..., "subprocess.CompletedProcess[str]"]  # kubectl with the admin kubeconfig


@dataclass(frozen=True)
class AdmissionPki:
    """The certificates cert-manager would issue, and the API server's AdmissionConfiguration."""

    certs: DevCertificates
    admission_config: Path

    @classmethod
    def make(cls, directory: Path) -> AdmissionPki:
        # certificate.yaml's dnsNames for the serving certificate.
        certs = make_dev_certificates(directory, hosts=(SERVICE_HOST, f"{SERVICE_HOST}.cluster.local"))
        return cls(certs, write_admission_config(directory, certs.client, host=SERVICE_HOST))

    def issued(self) -> dict[str, tuple[Issued, Path]]:
        """Each of certificate.yaml's Certificates: its pair and the CA that signed it (``ca.crt``)."""
        certs = self.certs
        return {
            "recovery-admission-ca": (certs.server_ca, certs.server_ca.cert),
            "recovery-admission": (certs.server, certs.server_ca.cert),
            "recovery-admission-client-ca": (certs.client_ca, certs.client_ca.cert),
            "recovery-admission-apiserver-client": (certs.client, certs.client_ca.cert),
        }


def issue_certificates(run: Run, rendered: list[Doc], pki: AdmissionPki) -> list[str]:
    """Every rendered Certificate's Secret, as cert-manager writes it; returns the Secrets' names."""
    certificates = of_kind(rendered, "Certificate")
    issued = pki.issued()
    assert set(certificates) == set(issued), (
        f"deploy/ has Certificates the rehearsal does not issue: {certificates}"
    )
    names = []
    for name, certificate in certificates.items():
        pair, ca = issued[name]
        secret = certificate["spec"]["secretName"]
        made = run(
            "-n",
            certificate["metadata"]["namespace"],
            "create",
            "secret",
            "generic",
            secret,
            "--type=kubernetes.io/tls",
            f"--from-file=tls.crt={pair.cert}",
            f"--from-file=tls.key={pair.key}",
            f"--from-file=ca.crt={ca}",
        )
        assert made.returncode == 0, made.stderr
        names.append(secret)
    return names


def inject_ca_bundle(run: Run, rendered: list[Doc]) -> None:
    """cainjector's work: the ``ca.crt`` of the Certificate each configuration names, as every one of
    its webhooks' caBundle (without it the API server cannot verify the webhook: under
    ``failurePolicy: Ignore`` every job is then created without its policy)."""
    for name, config in of_kind(rendered, "MutatingWebhookConfiguration").items():
        namespace, certificate = config["metadata"]["annotations"][INJECT_CA_FROM].split("/")
        secret = of_kind(rendered, "Certificate")[certificate]["spec"]["secretName"]
        got = run("-n", namespace, "get", "secret", secret, "-o", "jsonpath={.data.ca\\.crt}")
        assert got.returncode == 0 and got.stdout, got.stderr
        ops = [
            {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": got.stdout}
            for i in range(len(config["webhooks"]))
        ]
        patched = run("patch", "mutatingwebhookconfiguration", name, "--type=json", "-p", json.dumps(ops))
        assert patched.returncode == 0, patched.stderr


def endpoints_for(services: list[Doc], pod: Pod) -> list[Doc]:
    """The Endpoints of every Service selecting ``pod`` (its template's labels), with the pod's address
    and, per Service port, the pod's port its ``targetPort`` names: what the endpoints controller writes
    once the pod is Ready."""
    labels = pod.doc["spec"]["template"]["metadata"].get("labels") or {}
    found = []
    for service in services:
        selector = service["spec"].get("selector") or {}
        if not selector or any(labels.get(key) != value for key, value in selector.items()):
            continue
        ports = []
        for port in service["spec"]["ports"]:
            target = str(port.get("targetPort", port["port"]))
            if target in pod.ports:
                ports.append({"port": pod.ports[target], "protocol": port.get("protocol", "TCP")})
                if "name" in port:
                    ports[-1]["name"] = port["name"]
        address = {"ip": POD_ADDRESS, "targetRef": {"kind": "Pod", "name": pod.component}}
        found.append(
            {
                "apiVersion": "v1",
                "kind": "Endpoints",
                "metadata": {
                    "name": service["metadata"]["name"],
                    "namespace": service["metadata"]["namespace"],
                },
                "subsets": [{"addresses": [address], "ports": ports}],
            }
        )
    return found

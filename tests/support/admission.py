"""The admission tests' jobs and webhook registration (``tests/admission``)."""

from __future__ import annotations

from typing import Any

from django.core.management import call_command

from mindcluster import keys as k
from simcluster.kube import Kube
from tests.support.admission_tls import AdmissionTls
from tests.support.sim import make_job

DEFAULT_SPEC = {
    "mindcluster_version": "26.1",
    "strategies": ["retry", "recover", "dump"],
    "fault_scheduling": "grace",
}


def register(url: str, tls: AdmissionTls, *args: str, cluster: str = "sim") -> None:
    """``register_webhook`` for the https webhook, its caBundle the serving CA (what cert-manager injects)."""
    ca = str(tls.certs.server_ca.cert)
    call_command("register_webhook", "--cluster", cluster, "--url", url, "--ca-bundle", ca, *args)


def bare_job(name: str, namespace: str, **kw: Any) -> dict[str, Any]:
    """A job with no recovery keys at all (what a team's own scheduler submits)."""
    manifest = make_job(name, namespace=namespace, strategies=None, **kw)
    manifest["metadata"]["labels"].pop(k.LABEL_FAULT_SCHEDULING)
    return manifest


def create(kube: Kube, manifest: dict[str, Any], **kw: Any) -> dict[str, Any]:
    meta = manifest["metadata"]
    return kube.custom.create_namespaced_custom_object(
        k.ASCENDJOB_GROUP, k.ASCENDJOB_VERSION, meta["namespace"], k.ASCENDJOB_PLURAL, manifest, **kw
    )

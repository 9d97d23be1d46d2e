"""Issue #24 item 1: only the API server may call the webhook.

The routes exist only where ``ADMISSION_WEBHOOK=true`` (``controlplane.admission_urls``); the public
web process answers 404. The admission server requires a client certificate from the client CA at
the TLS layer, so a forged ``AdmissionReview`` (no certificate, or another CA's) never reaches
Django and changes no row. The serving certificate is re-read when its files change (cert-manager
renewals) or on SIGHUP.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import Resolver404, resolve

from apps.admission.devcerts import Issued, issue, make_ca
from apps.admission.models import PendingAdmission
from apps.admission.serving import AdmissionServer
from apps.admission.tls import ReloadingServerContext
from apps.jobs.models import TrainingJob
from apps.policies.models import PolicyRevision
from mindcluster import keys as k
from tests.support import REPO_ROOT, wait_for
from tests.support.admission_tls import AdmissionTls, post_review, served_certificate
from tests.support.processes import AsgiServer, connectable, free_port, server_env
from tests.support.world import World

URL = "/admission/ascendjobs/"


def forged_review(namespace: str, name: str) -> dict[str, Any]:
    """What an attacker on the web port would send: revision 1 of their choosing for a live job."""
    job = {
        "apiVersion": f"{k.ASCENDJOB_GROUP}/{k.ASCENDJOB_VERSION}",
        "kind": k.ASCENDJOB_KIND,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {"recovery.mindcluster.io/preset": "dying-gasp"},
        },
        "spec": {},
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "forged-1",
            "kind": {"group": k.ASCENDJOB_GROUP, "version": k.ASCENDJOB_VERSION, "kind": k.ASCENDJOB_KIND},
            "operation": "CREATE",
            "namespace": namespace,
            "object": job,
        },
    }


def _rows() -> tuple[int, ...]:
    return (
        TrainingJob.objects.count(),
        TrainingJob.objects.filter(deleted_at__isnull=False).count(),
        PolicyRevision.objects.count(),
        PendingAdmission.objects.count(),
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("caller", ["no certificate", "another CA's certificate"])
def test_a_forged_review_from_outside_is_refused_at_tls_and_changes_no_row(
    world: World, webhook_url: str, admission_tls: AdmissionTls, caller: str
) -> None:
    before = _rows()
    client = None if caller == "no certificate" else admission_tls.foreign_client
    with pytest.raises((ssl.SSLError, ConnectionError)):
        post_review(
            webhook_url,
            forged_review(world.job.namespace, world.job.name),
            server_ca=admission_tls.certs.server_ca.cert,
            client=client,
        )
    assert _rows() == before
    # The API server's certificate is answered (the same server, the same body).
    status, answer = post_review(
        webhook_url,
        forged_review(world.job.namespace, world.job.name),
        server_ca=admission_tls.certs.server_ca.cert,
        client=admission_tls.certs.client,
    )
    assert status == 200 and answer["response"]["allowed"] is True
    world.job.refresh_from_db()
    assert world.job.deleted_at is None  # even a real review changes no job row


@pytest.mark.django_db
def test_the_public_urlconf_has_no_webhook() -> None:
    with pytest.raises(Resolver404):
        resolve(URL)
    assert Client().post(URL, "{}", content_type="application/json").status_code == 404


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow(seconds=10)
def test_the_public_web_process_answers_404(world: World) -> None:
    redis = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/13")
    server = AsgiServer(redis)
    server.start()
    try:
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        body = json.dumps(forged_review(world.job.namespace, world.job.name))
        conn.request("POST", URL, body, headers={"Content-Type": "application/json"})
        assert conn.getresponse().status == 404
        conn.close()
    finally:
        server.stop()


def _pair(directory: Path, ca: tuple[Any, Any], serial_name: str) -> Issued:
    return issue(directory, serial_name, "recovery-admission", ca, server_hosts=("127.0.0.1",))


def _swap_in(secret_dir: Path, pair: Issued) -> None:
    """What the kubelet does when a Secret changes: new files, then one atomic symlink swap."""
    version = secret_dir / f"..{pair.cert.stem}"
    version.mkdir()
    shutil.copy(pair.cert, version / "tls.crt")
    shutil.copy(pair.key, version / "tls.key")
    link = secret_dir / "..data.tmp"
    link.symlink_to(version.name)
    link.replace(secret_dir / "..data")


def test_the_serving_certificate_is_reloaded_when_the_secret_changes(
    tmp_path: Path, admission_tls: AdmissionTls
) -> None:
    from controlplane.asgi import application

    _, ca_cert, ca_key = make_ca(tmp_path / "ca", "ca", "serving-ca")
    first, second = (
        _pair(tmp_path / "ca", (ca_cert, ca_key), "one"),
        _pair(tmp_path / "ca", (ca_cert, ca_key), "two"),
    )
    secret = tmp_path / "secret"
    secret.mkdir()
    _swap_in(secret, first)
    for name in ("tls.crt", "tls.key"):
        (secret / name).symlink_to(f"..data/{name}")
    client = admission_tls.certs.client
    tls = ReloadingServerContext(secret / "tls.crt", secret / "tls.key", admission_tls.certs.client_ca.cert)
    server = AdmissionServer(application, tls, reload_seconds=0.1)
    ca_file = tmp_path / "ca" / "ca.crt"

    def der(pair: Issued) -> bytes:
        return ssl.PEM_cert_to_DER_cert(pair.cert.read_text())

    try:
        assert served_certificate(server.url, ca_file, client) == der(first)
        _swap_in(secret, second)  # cert-manager renewed it
        wait_for(lambda: served_certificate(server.url, ca_file, client) == der(second), 10, "renewed cert")
        # A key that does not match its certificate (half-written) keeps the pair in force.
        broken = tmp_path / "broken"
        broken.mkdir()
        shutil.copy(first.cert, broken / "broken.crt")
        shutil.copy(second.key, broken / "broken.key")
        _swap_in(secret, Issued(broken / "broken.crt", broken / "broken.key"))
        server.reload_now()
        assert served_certificate(server.url, ca_file, client) == der(second)
    finally:
        server.stop()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow(seconds=15)
def test_serve_admission_serves_tls_to_the_api_server_only_and_reloads_on_sighup(
    tmp_path: Path, admission_tls: AdmissionTls
) -> None:
    certs = admission_tls.certs
    _, ca_cert, ca_key = make_ca(tmp_path / "ca", "ca", "serving-ca")
    server_ca = tmp_path / "ca" / "ca.crt"
    first, renewed = (
        _pair(tmp_path / "ca", (ca_cert, ca_key), "one"),
        _pair(tmp_path / "ca", (ca_cert, ca_key), "two"),
    )
    serving = tmp_path / "tls"
    serving.mkdir()
    shutil.copy(first.cert, serving / "tls.crt")
    shutil.copy(first.key, serving / "tls.key")
    redis = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/13")
    port = free_port()
    command = [sys.executable, "manage.py", "serve_admission", "--host", "127.0.0.1", "--port", str(port)]
    env = server_env(
        redis,
        ADMISSION_TLS_CERT_FILE=str(serving / "tls.crt"),
        ADMISSION_TLS_KEY_FILE=str(serving / "tls.key"),
        ADMISSION_CLIENT_CA_FILE=str(certs.client_ca.cert),
        ADMISSION_TLS_RELOAD_SECONDS="3600",  # only SIGHUP reloads in this test
    )
    refused = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "ADMISSION_WEBHOOK" in refused.stderr
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env={**env, "ADMISSION_WEBHOOK": "true"},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"https://127.0.0.1:{port}"
    try:
        wait_for(lambda: connectable(port) or proc.poll() is not None, 60, "serve_admission listening")
        assert proc.poll() is None, log_path.read_text()[-2000:]
        for outsider in (None, admission_tls.foreign_client):
            with pytest.raises((ssl.SSLError, ConnectionError)):
                post_review(url, b"[]", server_ca=server_ca, client=outsider)
        status, answer = post_review(url, b"[]", server_ca=server_ca, client=certs.client)
        assert status == 400 and "not an AdmissionReview" in answer["error"]  # reached the webhook
        assert served_certificate(url, server_ca, certs.client) == ssl.PEM_cert_to_DER_cert(
            first.cert.read_text()
        )
        shutil.copy(renewed.cert, serving / "tls.crt")
        shutil.copy(renewed.key, serving / "tls.key")
        proc.send_signal(signal.SIGHUP)
        want = ssl.PEM_cert_to_DER_cert(renewed.cert.read_text())
        wait_for(lambda: served_certificate(url, server_ca, certs.client) == want, 20, "reloaded on SIGHUP")
    finally:
        proc.terminate()
        proc.wait(20)


def test_the_plain_http_probe_port_answers_only_the_probes() -> None:
    """The kubelet has no client certificate: serve_admission --probe-port answers /livez and /readyz
    over plain HTTP, and nothing else (the webhook is never reachable without the TLS handshake)."""
    import asyncio

    from apps.admission.serving import probes_only

    seen: list[str] = []

    async def inner(scope: dict[str, object], receive: object, send: object) -> None:
        seen.append(str(scope["path"]))

    async def call(path: str) -> int:
        sent: list[dict[str, object]] = []

        async def send(message: dict[str, object]) -> None:
            sent.append(message)

        await probes_only(inner)({"type": "http", "path": path}, None, send)
        return int(sent[0]["status"]) if sent else 0  # type: ignore[call-overload]

    assert asyncio.run(call("/admission/ascendjobs/")) == 404
    assert asyncio.run(call("/readyz")) == 0 and asyncio.run(call("/livez")) == 0  # passed through
    assert seen == ["/readyz", "/livez"]

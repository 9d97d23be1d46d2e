"""The built-in cluster calls mutating webhooks like kube-apiserver: rules, selectors, failurePolicy, timeout.

The webhook here is a tiny real HTTP server (no Django) so the emulator's side is tested on its own;
the product's webhook is exercised end to end in ``test_admission_e2e.py``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from apps.admission.devcerts import make_dev_certificates, write_admission_config
from simcluster.kubeapi import KubeApiEmulator


class Hook:
    """A webhook server whose behaviour each test sets: patch, deny, sleep, or garbage."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.mode = "patch"
        self.delay = 0.0
        self.reviews: list[dict[str, Any]] = []
        self.hosts: list[str] = []  # the Host header of each call
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                hook.reviews.append(review)
                hook.hosts.append(self.headers["Host"])
                time.sleep(hook.delay)
                uid = review["request"]["uid"]
                response: dict[str, Any] = {"uid": uid, "allowed": hook.mode != "deny"}
                if hook.mode == "patch":
                    ops = [{"op": "add", "path": "/metadata/labels/mutated~1by", "value": "hook"}]
                    response.update(
                        patchType="JSONPatch", patch=base64.b64encode(json.dumps(ops).encode()).decode()
                    )
                if hook.mode == "deny":
                    response["status"] = {"code": 403, "message": "no thanks"}
                if hook.mode == "wrong-uid":
                    response["uid"] = "other"
                body = json.dumps(
                    {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                # The slow-webhook test: the API server gave up waiting (as it should) and hung up.
                with contextlib.suppress(BrokenPipeError):
                    self.wfile.write(body.encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}/mutate"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def emu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KubeApiEmulator, client.ApiClient]]:
    emulator = KubeApiEmulator(host="127.0.0.1", port=0).start()
    cfg = emulator.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
    api = config.new_client_from_config(config_file=str(cfg))
    yield emulator, api
    api.close()
    emulator.stop()


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    yield h
    h.stop()


def _register(api: client.ApiClient, url: str, **overrides: Any) -> str:
    name = f"hook-{uuid.uuid4().hex[:6]}"
    webhook: dict[str, Any] = {
        "name": "cm.example.io",
        "clientConfig": {"url": url},
        "rules": [
            {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}
        ],
        "namespaceSelector": {"matchLabels": {"managed": "true"}},
        "failurePolicy": "Ignore",
        "timeoutSeconds": 1,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    }
    webhook.update(overrides)
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [webhook],
    }
    client.AdmissionregistrationV1Api(api).create_mutating_webhook_configuration(body)
    return name


def _namespace(api: client.ApiClient, managed: bool) -> str:
    ns = f"ns-{uuid.uuid4().hex[:8]}"
    labels = {"managed": "true"} if managed else {}
    client.CoreV1Api(api).create_namespace({"metadata": {"name": ns, "labels": labels}})
    return ns


def _cm(api: client.ApiClient, ns: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    created = client.CoreV1Api(api).create_namespaced_config_map(
        ns, {"metadata": {"name": "c1", "labels": labels or {"app": "x"}}, "data": {"k": "v"}}
    )
    return created.metadata.labels or {}


@pytest.fixture
def cleanup(emu: tuple[KubeApiEmulator, client.ApiClient]) -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    admission = client.AdmissionregistrationV1Api(emu[1])
    for name in names:
        admission.delete_mutating_webhook_configuration(name)


def test_matching_create_is_patched_and_the_review_is_v1(emu, hook, cleanup) -> None:
    api = emu[1]
    cleanup.append(_register(api, hook.url))
    ns = _namespace(api, managed=True)
    assert _cm(api, ns)["mutated/by"] == "hook"
    stored = client.CoreV1Api(api).read_namespaced_config_map("c1", ns)
    assert stored.metadata.labels["mutated/by"] == "hook"  # stored after the patch
    request = hook.reviews[-1]["request"]
    assert hook.reviews[-1]["apiVersion"] == "admission.k8s.io/v1"
    assert request["operation"] == "CREATE" and request["namespace"] == ns
    assert request["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert request["object"]["metadata"]["name"] == "c1"


def test_namespace_and_object_selectors_and_rules_limit_the_calls(emu, hook, cleanup) -> None:
    api = emu[1]
    cleanup.append(
        _register(
            api, hook.url, objectSelector={"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]}
        )
    )
    assert "mutated/by" not in _cm(api, _namespace(api, managed=False))  # namespace not selected
    assert "mutated/by" not in _cm(api, _namespace(api, managed=True), {"skip": "yes"})  # object not selected
    before = len(hook.reviews)
    ns = _namespace(api, managed=True)
    client.CoreV1Api(api).create_namespaced_event(
        ns,
        {
            "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": "R",
            "message": "m",
        },
    )
    assert len(hook.reviews) == before  # rules name configmaps only


def test_ignore_policy_lets_the_create_through_when_the_hook_is_down_or_slow(emu, hook, cleanup) -> None:
    api = emu[1]
    cleanup.append(_register(api, "http://127.0.0.1:1/unreachable"))
    ns = _namespace(api, managed=True)
    assert "mutated/by" not in _cm(api, ns)
    client.AdmissionregistrationV1Api(api).delete_mutating_webhook_configuration(cleanup.pop())
    cleanup.append(_register(api, hook.url))
    hook.delay = 1.5  # over timeoutSeconds: 1
    started = time.monotonic()
    labels = _cm(api, _namespace(api, managed=True))
    assert "mutated/by" not in labels
    assert time.monotonic() - started < 1.45


def test_fail_policy_rejects_when_the_hook_is_down_and_a_denial_rejects(emu, hook, cleanup) -> None:
    api = emu[1]
    cleanup.append(_register(api, "http://127.0.0.1:1/unreachable", failurePolicy="Fail"))
    ns = _namespace(api, managed=True)
    with pytest.raises(ApiException) as err:
        _cm(api, ns)
    assert err.value.status == 500 and "failed calling webhook" in err.value.body
    client.AdmissionregistrationV1Api(api).delete_mutating_webhook_configuration(cleanup.pop())
    cleanup.append(_register(api, hook.url))
    hook.mode = "deny"
    with pytest.raises(ApiException) as err:
        _cm(api, ns)
    assert err.value.status == 403 and "no thanks" in err.value.body
    hook.mode = "wrong-uid"  # an unusable answer under Ignore: created unpatched
    assert "mutated/by" not in _cm(api, ns)


def test_http_is_refused_off_loopback(emu, hook, cleanup) -> None:
    api = emu[1]
    cleanup.append(_register(api, "http://10.255.255.1/mutate", failurePolicy="Fail"))
    with pytest.raises(ApiException) as err:
        _cm(api, _namespace(api, managed=True))
    assert err.value.status == 500 and "loopback" in err.value.body


# --- the real order: webhooks before validation and storage; dry runs; the client certificate ----------


def test_the_webhook_is_called_for_a_create_that_then_fails_with_already_exists(emu, hook, cleanup) -> None:
    """Mutating admission runs before the store's AlreadyExists check: create.go's ``createHandler``
    calls ``mutatingAdmission.Admit`` before ``r.Create``, and store.go's ``Store.Create`` runs
    ``rest.BeforeCreate`` (validation) and then ``e.Storage.Create``, which returns AlreadyExists
    (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/create.go,
    staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go)."""
    api = emu[1]
    cleanup.append(_register(api, hook.url))
    ns = _namespace(api, managed=True)
    _cm(api, ns)
    before = len(hook.reviews)
    with pytest.raises(ApiException) as err:
        _cm(api, ns)
    assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "AlreadyExists"
    assert len(hook.reviews) == before + 1  # asked, then refused by the store
    with pytest.raises(ApiException) as err:  # an invalid name: refused by validation, after the webhook
        client.CoreV1Api(api).create_namespaced_config_map(ns, {"metadata": {"name": "Not_Valid"}})
    assert err.value.status == 422
    assert len(hook.reviews) == before + 2


@pytest.mark.parametrize(
    ("side_effects", "called"), [("NoneOnDryRun", True), ("None", True), ("Some", False)]
)
def test_a_dry_run_reaches_only_webhooks_without_side_effects(
    emu, hook, cleanup, side_effects: str, called: bool
) -> None:
    """The mutating dispatcher refuses a dry run for a webhook with side effects
    (staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/mutating/dispatcher.go,
    ``webhookerrors.NewDryRunUnsupportedErr``: 400 "does not support dry run")."""
    api = emu[1]
    cleanup.append(_register(api, hook.url, sideEffects=side_effects))
    ns = _namespace(api, managed=True)
    before = len(hook.reviews)
    body = {"metadata": {"name": "dry", "labels": {"app": "x"}}, "data": {"k": "v"}}
    if called:
        created = client.CoreV1Api(api).create_namespaced_config_map(ns, body, dry_run="All")
        assert created.metadata.labels["mutated/by"] == "hook"
        assert hook.reviews[-1]["request"]["dryRun"] is True
    else:
        with pytest.raises(ApiException) as err:
            client.CoreV1Api(api).create_namespaced_config_map(ns, body, dry_run="All")
        assert err.value.status == 400 and "does not support dry run" in err.value.body
    assert len(hook.reviews) == before + int(called)
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(api).read_namespaced_config_map("dry", ns)
    assert err.value.status == 404  # a dry run stores nothing


def test_the_client_certificate_is_chosen_by_host_as_the_apiserver_does() -> None:
    """authentication.go's ``clientConfig``: exact host:port, ``*.suffix``, then without ``:443``, then ``*``
    (staging/src/k8s.io/apiserver/pkg/util/webhook/authentication.go)."""
    from simcluster.kubeapi.admission import _auth_info_for

    users = {
        "hook.ns.svc:8443": {"id": "exact"},
        "*.ns.svc:8443": {"id": "star-port"},
        "plain.ns.svc": {"id": "no-port"},
        "*.other.svc": {"id": "star-no-port"},
        "*": {"id": "default"},
    }
    assert _auth_info_for(users, "hook.ns.svc:8443") == {"id": "exact"}
    assert _auth_info_for(users, "x.ns.svc:8443") == {"id": "star-port"}
    assert _auth_info_for(users, "plain.ns.svc:443") == {"id": "no-port"}
    assert _auth_info_for(users, "y.other.svc:443") == {"id": "star-no-port"}
    assert _auth_info_for(users, "y.other.svc:8443") == {"id": "default"}
    assert _auth_info_for({}, "a:443") is None


def test_a_service_is_called_at_its_endpoints_with_its_dns_name_for_tls_host_and_client_cert(
    tmp_path: Path,
) -> None:
    """client.go ``HookClient``: TLS server name, Host and the AdmissionConfiguration user are the
    service's ``name.namespace.svc``; the connection goes to a ready address of its Endpoints on the
    port named like the Service's (proxy.go ``ResolveEndpoints``). No Endpoints: a failed call."""
    host = "hook.hooks.svc"
    certs = make_dev_certificates(tmp_path, hosts=(host,))
    admission_config = write_admission_config(tmp_path, certs.client, host=host)  # only this host's user
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(str(certs.server.cert), str(certs.server.key))
    tls.load_verify_locations(str(certs.client_ca.cert))
    tls.verify_mode = ssl.CERT_REQUIRED  # as serve_admission: the API server's certificate only
    hook = Hook(tls)
    emulator = KubeApiEmulator(host="127.0.0.1", port=0, admission_config=str(admission_config)).start()
    api = config_client(emulator, tmp_path)
    core = client.CoreV1Api(api)
    try:
        core.create_namespace({"metadata": {"name": "hooks"}})
        service = {"ports": [{"name": "https", "port": 443, "targetPort": 8443}], "selector": {"app": "hook"}}
        core.create_namespaced_service("hooks", {"metadata": {"name": "hook"}, "spec": service})
        ref = {"namespace": "hooks", "name": "hook", "path": "/mutate"}
        bundle = base64.b64encode(certs.server_ca.cert.read_bytes()).decode()
        _register(api, "", clientConfig={"service": ref, "caBundle": bundle}, failurePolicy="Fail")
        ns = _namespace(api, managed=True)
        with pytest.raises(ApiException) as err:
            _cm(api, ns)
        assert err.value.status == 500 and "no endpoints available for service" in err.value.body
        subset = {"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": hook.port}]}
        core.create_namespaced_endpoints("hooks", {"metadata": {"name": "hook"}, "subsets": [subset]})
        assert _cm(api, ns)["mutated/by"] == "hook"
        assert hook.hosts == [f"{host}:443"]
    finally:
        hook.stop()
        api.close()
        emulator.stop()


def config_client(emulator: KubeApiEmulator, directory: Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(emulator.write_kubeconfig(directory / "kubeconfig")))

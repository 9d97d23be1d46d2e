"""Mutating admission webhooks, called on CREATE the way kube-apiserver calls them.

The server hands every CREATE body to :func:`admit_create` before it stores anything. For each
``MutatingWebhookConfiguration`` (``admissionregistration.k8s.io/v1``, ordered by name, webhooks in
their listed order, as the apiserver's webhook source does) whose rules, ``namespaceSelector`` and
``objectSelector`` match, it posts an ``AdmissionReview`` (``admission.k8s.io/v1``), checks the
answer, applies a ``JSONPatch`` and passes the result on. A call that fails (refused, timed out, bad
answer) is skipped under ``failurePolicy: Ignore`` and fails the request under ``Fail`` (the v1
default). A webhook that says ``allowed: false`` rejects the request with its status.

Order, as in kube-apiserver: the body is decoded, then the mutating webhooks run, then the object
is validated (metadata, generateName) and stored, where a taken name fails with AlreadyExists. So a
webhook IS called for a create that then fails: ``staging/src/k8s.io/apiserver/pkg/endpoints/
handlers/create.go`` (``createHandler``: ``decoder.Decode``, then ``mutatingAdmission.Admit``, then
``r.Create``) and ``staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go``
(``Store.Create``: ``rest.BeforeCreate`` validates, then ``e.Storage.Create`` returns AlreadyExists
via ``storeerr.InterpretCreateError``). The server calls :func:`admit_create` before its create path.

A dry-run request is sent only to webhooks declaring ``sideEffects: None`` or ``NoneOnDryRun``; any
other fails the request with 400 "does not support dry run", as the apiserver's mutating dispatcher
does (``staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/mutating/dispatcher.go``,
``webhookerrors.NewDryRunUnsupportedErr``).

The client certificate the API server presents to a webhook comes from its ``AdmissionConfiguration``
(``--admission-control-config-file``): the ``kubeConfigFile`` of the ``MutatingAdmissionWebhook``
plugin, whose ``users`` are matched by the webhook's ``host:port`` (exact, then ``*.domain``, then
without ``:443``, then ``*``), as ``staging/src/k8s.io/apiserver/pkg/util/webhook/authentication.go``
(``defaultAuthenticationInfoResolver.clientConfig``) does. Here the file is named by the
``SimCluster(admission_config=...)`` (the apiserver's flag, per cluster) or else the
``SIMCLUSTER_ADMISSION_CONFIG`` environment variable (the same file format).

A ``clientConfig.service`` is called as kube-apiserver calls it (``staging/src/k8s.io/apiserver/pkg/
util/webhook/client.go``, ``HookClient``): TLS server name and client-certificate host
``<name>.<namespace>.svc`` (port defaults to 443), the connection dialled to an address the service
resolver picks. The resolver is the endpoints one (kube-apiserver with ``--enable-aggregator-routing``;
``staging/src/k8s.io/apiserver/pkg/util/proxy/proxy.go``, ``ResolveEndpoint``): the Service's port
with that number, then a ready address of its ``Endpoints`` object on the port of the same name; no
Service, no such port or no address is a failed call. Nothing here writes Endpoints: whoever runs the
pods plays the endpoints controller (the deploy rehearsal adds a pod once it is Ready). One liberty, so
a local run needs no DNS: ``clientConfig.url`` may be ``http://`` when its host is a loopback address
(a real apiserver refuses any ``http`` URL).
Not emulated: ``reinvocationPolicy``, ``matchPolicy: Equivalent`` conversions, match conditions,
and admission on UPDATE/DELETE or on the server-side-apply create path.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import logging
import os
import random
import ssl
import tempfile
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import yaml

from .errors import ApiError
from .patch import PatchDecodeError, PatchError, json_patch
from .resources import ENDPOINTS, MUTATING_WEBHOOK_CONFIGURATIONS, NAMESPACES, SERVICES, ResourceType
from .store import Store, dumps

log = logging.getLogger(__name__)

REVIEW_API_VERSION = "admission.k8s.io/v1"
DEFAULT_TIMEOUT_SECONDS = 10  # admissionregistration/v1 default; the allowed range is 1-30
_OPERATION = "CREATE"


class CallFailed(Exception):
    """The webhook could not be called or gave an unusable answer (failurePolicy decides)."""


# --- matching -----------------------------------------------------------------------------------------


def selector_matches(selector: Any, labels: dict[str, str] | None) -> bool:
    """A ``metav1.LabelSelector`` (matchLabels + matchExpressions); null or {} matches everything."""
    if not selector:
        return True
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def _one_matches(patterns: list[str] | None, value: str) -> bool:
    return any(p == "*" or p == value for p in patterns or [])


def rule_matches(rule: dict[str, Any], rt: ResourceType) -> bool:
    resources = rule.get("resources") or []
    scope = rule.get("scope") or "*"
    if (scope == "Namespaced" and not rt.namespaced) or (scope == "Cluster" and rt.namespaced):
        return False
    return (
        _one_matches(rule.get("operations"), _OPERATION)
        and _one_matches(rule.get("apiGroups"), rt.group)
        and _one_matches(rule.get("apiVersions"), rt.version)
        # "*/*" also matches subresources; a CREATE here is never on a subresource.
        and any(r in ("*", "*/*", rt.plural) for r in resources)
    )


def _webhook_applies(
    store: Store, hook: dict[str, Any], rt: ResourceType, ns: str, obj: dict[str, Any]
) -> bool:
    if not any(rule_matches(r, rt) for r in hook.get("rules") or []):
        return False
    meta = obj.get("metadata") or {}
    if not selector_matches(hook.get("objectSelector"), meta.get("labels")):
        return False
    if rt is NAMESPACES:  # a namespace is matched by its own labels
        return selector_matches(hook.get("namespaceSelector"), meta.get("labels"))
    if not rt.namespaced:
        return True  # namespaceSelector does not apply to cluster-scoped objects
    namespace = store.get(NAMESPACES, "", ns)
    labels = (namespace.obj.get("metadata") or {}).get("labels") if namespace else {}
    return selector_matches(hook.get("namespaceSelector"), labels)


# --- calling ----------------------------------------------------------------------------------------


def _is_loopback(host: str | None) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


ADMISSION_CONFIG_ENV = "SIMCLUSTER_ADMISSION_CONFIG"
_SIDE_EFFECTS_SAFE_FOR_DRY_RUN = ("None", "NoneOnDryRun")


def admission_config_path(configured: str | None) -> str:
    """The cluster's own AdmissionConfiguration file, else the one the environment names ("" = none)."""
    return configured or os.environ.get(ADMISSION_CONFIG_ENV, "")


def _admission_kubeconfig(config_path: str) -> tuple[Path, dict[str, Any]] | None:
    """The ``MutatingAdmissionWebhook`` plugin's kubeconfig named by the AdmissionConfiguration file."""
    if not config_path:
        return None
    try:
        config = yaml.safe_load(Path(config_path).read_text()) or {}
        plugin = next(p for p in config.get("plugins") or [] if p.get("name") == "MutatingAdmissionWebhook")
        kubeconfig_file = Path((plugin.get("configuration") or {})["kubeConfigFile"])
    except (OSError, yaml.YAMLError, StopIteration, KeyError, TypeError, AttributeError) as exc:
        raise CallFailed(f"admission configuration {config_path}: {exc!r}") from None
    if not kubeconfig_file.is_absolute():
        kubeconfig_file = Path(config_path).parent / kubeconfig_file
    try:
        return kubeconfig_file, yaml.safe_load(kubeconfig_file.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise CallFailed(f"admission kubeconfig {kubeconfig_file}: {exc}") from None


def _auth_info_for(users: dict[str, dict[str, Any]], target: str) -> dict[str, Any] | None:
    """authentication.go's order: exact, ``*.suffix``, both again without ``:443``, then ``*``."""
    candidates = [target]
    host, _, port = target.rpartition(":")
    if port == "443":
        candidates.append(host)
    for name in candidates:
        if name in users:
            return users[name]
        steps = name.split(".")
        for i in range(1, len(steps)):
            star = "*." + ".".join(steps[i:])
            if star in users:
                return users[star]
    return users.get("*")


def _load_client_certificate(context: ssl.SSLContext, base: Path, user: dict[str, Any]) -> None:
    cert, key = user.get("client-certificate"), user.get("client-key")
    if cert and key:
        context.load_cert_chain(str(base / cert), str(base / key))
        return
    cert_data, key_data = user.get("client-certificate-data"), user.get("client-key-data")
    if cert_data and key_data:
        # ssl loads a chain from files only: a private temporary file, removed once loaded.
        with tempfile.TemporaryDirectory() as tmp:
            cert_file, key_file = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert_file.write_bytes(base64.b64decode(cert_data))
            key_file.write_bytes(base64.b64decode(key_data))
            context.load_cert_chain(str(cert_file), str(key_file))


_contexts: dict[tuple[str, str, str, int], ssl.SSLContext] = {}


def _client_context(target: str, ca: str | None, config_path: str) -> ssl.SSLContext:
    """:func:`_new_client_context`, kept per ``host:port``, caBundle and admission configuration version
    (a context per call would re-read the files and keys on every CREATE)."""
    try:
        version = os.stat(config_path).st_mtime_ns if config_path else 0
    except OSError:
        version = -1
    key = (target, ca or "", config_path, version)
    context = _contexts.get(key)
    if context is None:
        context = _contexts[key] = _new_client_context(target, ca, config_path)
    return context


def _new_client_context(target: str, ca: str | None, config_path: str) -> ssl.SSLContext:
    """The TLS context for an https webhook: its caBundle (or the system store) and the client
    certificate the admission configuration names for ``target`` (``host:port``)."""
    try:
        context = (
            ssl.create_default_context(cadata=base64.b64decode(ca).decode())
            if ca
            else ssl.create_default_context()
        )
    except (ValueError, ssl.SSLError) as exc:
        raise CallFailed(f"invalid caBundle: {exc}") from None
    found = _admission_kubeconfig(config_path)
    if found is None:
        return context
    kubeconfig_file, kubeconfig = found
    users = {
        str(u.get("name")): (u.get("user") or {})
        for u in kubeconfig.get("users") or []
        if isinstance(u, dict)
    }
    user = _auth_info_for(users, target)
    if user:
        try:
            _load_client_certificate(context, kubeconfig_file.parent, user)
        except (OSError, ValueError, ssl.SSLError) as exc:
            raise CallFailed(f"client certificate for {target}: {exc}") from None
    return context


class Endpoint:
    """Where one call goes: the URL dialled, the TLS context (False: plain http on loopback), and for a
    service the name its certificate must carry and the ``Host`` header (client.go's ``cfg.Host`` is
    the service's ``name.namespace.svc:port``, whatever address the dialer resolved)."""

    def __init__(self, url: str, tls: ssl.SSLContext | bool, server_name: str | None = None) -> None:
        self.url, self.tls, self.server_name = url, tls, server_name
        self.host: str | None = None


def _resolve_service(store: Store, ref: dict[str, Any], port: int) -> str:
    """proxy.go ``ResolveEndpoints``: the Service's port numbered ``port``, then one ready address of
    its Endpoints on the port of the same name; ``ip:port``."""
    namespace, name = str(ref.get("namespace") or ""), str(ref.get("name") or "")
    service = store.get(SERVICES, namespace, name)
    if service is None:
        raise CallFailed(f'service "{name}" not found')
    spec = service.obj.get("spec") or {}
    service_port = next((p for p in spec.get("ports") or [] if p.get("port") == port), None)
    if service_port is None:
        raise CallFailed(f'no service port {port} found for service "{name}"')
    if spec.get("type", "ClusterIP") not in ("ClusterIP", "LoadBalancer", "NodePort"):
        raise CallFailed(f'unsupported service type "{spec.get("type")}"')
    endpoints = store.get(ENDPOINTS, namespace, name)
    found = [
        f"{address['ip']}:{endpoint_port['port']}"
        for subset in ((endpoints.obj.get("subsets") if endpoints else None) or [])
        for endpoint_port in subset.get("ports") or []
        if endpoint_port.get("name", "") == service_port.get("name", "")
        for address in subset.get("addresses") or []
    ]
    if not found:
        raise CallFailed(f'no endpoints available for service "{name}"')
    return random.choice(found)  # load spreading, as rand.Intn in proxy.go


def _endpoint(store: Store, hook: dict[str, Any], config_path: str) -> Endpoint:
    config = hook.get("clientConfig") or {}
    url = config.get("url")
    if not url:
        ref = config.get("service")
        if not ref:
            raise CallFailed("clientConfig has neither url nor service")
        # client.go HookClient: the service's DNS name for TLS and the client certificate, the
        # resolver's address for the connection.
        port = int(ref.get("port") or 443)
        server_name = f"{ref.get('name')}.{ref.get('namespace')}.svc"
        address = _resolve_service(store, ref, port)
        tls = _client_context(f"{server_name}:{port}", config.get("caBundle"), config_path)
        endpoint = Endpoint(f"https://{address}{ref.get('path') or ''}", tls, server_name)
        endpoint.host = f"{server_name}:{port}"
        return endpoint
    parts = urlsplit(url)
    if parts.scheme == "http":
        if not _is_loopback(parts.hostname):
            raise CallFailed(f"http:// is accepted only on loopback addresses, not {parts.hostname!r}")
        return Endpoint(url, False)
    if parts.scheme != "https":
        raise CallFailed(f"unsupported URL scheme {parts.scheme!r}")
    target = f"{parts.hostname}:{parts.port or 443}"
    return Endpoint(url, _client_context(target, config.get("caBundle"), config_path))


def build_review(rt: ResourceType, ns: str, obj: dict[str, Any], dry_run: bool) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    kind = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    resource = {"group": rt.group, "version": rt.version, "resource": rt.plural}
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": meta.get("name", ""),
        "operation": _OPERATION,
        "userInfo": {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]},
        "object": obj,
        "oldObject": None,
        "dryRun": dry_run,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    }
    if rt.namespaced:
        request["namespace"] = ns
    return {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "request": request}


async def _post(
    session: aiohttp.ClientSession, endpoint: Endpoint, hook: dict[str, Any], review: dict[str, Any]
) -> dict[str, Any]:
    url = endpoint.url
    timeout = hook.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS
    try:
        async with session.post(
            url,
            data=dumps(review),
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json",
                **({"Host": endpoint.host} if endpoint.host else {}),
            },
            ssl=endpoint.tls,
            server_hostname=endpoint.server_name,
            timeout=aiohttp.ClientTimeout(total=float(timeout)),
        ) as resp:
            body = await resp.read()
            if resp.status != 200:
                raise CallFailed(f"the server responded with HTTP {resp.status}")
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise CallFailed(
            f'failed to call webhook: Post "{url}": {type(exc).__name__} {exc}'.strip()
        ) from None
    try:
        answer = json.loads(body)
    except ValueError:
        raise CallFailed("the response is not JSON") from None
    if not isinstance(answer, dict) or answer.get("apiVersion") != REVIEW_API_VERSION:
        raise CallFailed(f"expected response apiVersion {REVIEW_API_VERSION}")
    response = answer.get("response")
    if not isinstance(response, dict):
        raise CallFailed("the response has no 'response' object")
    if response.get("uid") != review["request"]["uid"]:
        raise CallFailed(f"expected response.uid={review['request']['uid']!r}, got {response.get('uid')!r}")
    return response


def _apply(obj: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    patch = response.get("patch")
    if not patch:
        return obj
    if response.get("patchType") != "JSONPatch":
        raise CallFailed(f"unsupported patchType {response.get('patchType')!r} (only JSONPatch)")
    try:
        ops = json.loads(base64.b64decode(patch))
        patched = json_patch(obj, ops)
    except (ValueError, PatchError, PatchDecodeError) as exc:
        raise CallFailed(f"the patch cannot be applied: {exc}") from None
    if not isinstance(patched, dict):
        raise CallFailed("the patch replaced the object with a non-object")
    return patched


def _denied(name: str, response: dict[str, Any]) -> ApiError:
    status = response.get("status") or {}
    code = status.get("code") or 400
    message = status.get("message") or ""
    text = f'admission webhook "{name}" denied the request' + (
        f": {message}" if message else " without explanation"
    )
    return ApiError(
        int(code) if 400 <= int(code) < 600 else 400, text, reason=status.get("reason") or "BadRequest"
    )


async def admit_create(
    store: Store,
    rt: ResourceType,
    namespace: str,
    raw: bytes,
    dry_run: bool,
    admission_config: str | None = None,
) -> bytes:
    """Run the matching mutating webhooks on a CREATE body; returns the (possibly patched) body.
    ``admission_config``: the cluster's AdmissionConfiguration file (else the environment's).

    A body that is not a JSON object is returned untouched: the create path reports it, as the
    apiserver rejects undecodable input before admission runs.
    """
    if rt is MUTATING_WEBHOOK_CONFIGURATIONS:
        return raw  # the apiserver never calls webhooks for webhook configurations
    configs = store.current(MUTATING_WEBHOOK_CONFIGURATIONS, "")
    if not configs:
        return raw
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return raw
    if not isinstance(obj, dict):
        return raw
    obj.setdefault("apiVersion", rt.api_version)
    obj.setdefault("kind", rt.kind)
    if rt.namespaced and isinstance(obj.get("metadata"), dict):
        obj["metadata"].setdefault("namespace", namespace)
    hooks = [h for cfg in configs for h in (cfg.obj.get("webhooks") or []) if isinstance(h, dict)]
    matching = [h for h in hooks if _webhook_applies(store, h, rt, namespace, obj)]
    if not matching:
        return raw
    config_path = admission_config_path(admission_config)
    async with aiohttp.ClientSession() as session:
        for hook in matching:
            name = str(hook.get("name", ""))
            if dry_run and hook.get("sideEffects") not in _SIDE_EFFECTS_SAFE_FOR_DRY_RUN:
                raise ApiError(
                    400, f'admission webhook "{name}" does not support dry run', reason="BadRequest"
                )
            try:
                endpoint = _endpoint(store, hook, config_path)
                response = await _post(session, endpoint, hook, build_review(rt, namespace, obj, dry_run))
                if not response.get("allowed"):
                    raise _denied(name, response)
                obj = _apply(obj, response)
            except CallFailed as exc:
                if hook.get("failurePolicy", "Fail") == "Ignore":
                    log.warning("webhook %s failed, ignored (failurePolicy Ignore): %s", name, exc)
                    continue
                raise ApiError(
                    500, f'Internal error occurred: failed calling webhook "{name}": {exc}'
                ) from None
    return dumps(obj)

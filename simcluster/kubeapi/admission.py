"""Mutating admission webhooks, called on CREATE the way kube-apiserver calls them.

The server hands every CREATE body to :func:`admit_create` before it stores anything. For each
``MutatingWebhookConfiguration`` (``admissionregistration.k8s.io/v1``, ordered by name, webhooks in
their listed order, as the apiserver's webhook source does) whose rules, ``namespaceSelector`` and
``objectSelector`` match, it posts an ``AdmissionReview`` (``admission.k8s.io/v1``), checks the
answer, applies a ``JSONPatch`` and passes the result on. A call that fails (refused, timed out, bad
answer) is skipped under ``failurePolicy: Ignore`` and fails the request under ``Fail`` (the v1
default). A webhook that says ``allowed: false`` rejects the request with its status.

Two liberties, both so a local run needs neither DNS nor certificates: ``clientConfig.url`` may be
``http://`` when its host is a loopback address (a real apiserver refuses any ``http`` URL), and a
``clientConfig.service`` cannot be resolved here, so calling one counts as a failed call.
Not emulated: ``reinvocationPolicy``, ``matchPolicy: Equivalent`` conversions, match conditions,
and admission on UPDATE/DELETE or on the server-side-apply create path.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import logging
import ssl
import uuid
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from .errors import ApiError
from .patch import PatchDecodeError, PatchError, json_patch
from .resources import MUTATING_WEBHOOK_CONFIGURATIONS, NAMESPACES, ResourceType
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


def _endpoint(hook: dict[str, Any]) -> tuple[str, ssl.SSLContext | bool]:
    config = hook.get("clientConfig") or {}
    url = config.get("url")
    if not url:
        if config.get("service"):
            svc = config["service"]
            raise CallFailed(
                f"service {svc.get('namespace')}/{svc.get('name')} cannot be resolved by the built-in "
                "cluster; use clientConfig.url"
            )
        raise CallFailed("clientConfig has neither url nor service")
    parts = urlsplit(url)
    if parts.scheme == "http":
        if not _is_loopback(parts.hostname):
            raise CallFailed(f"http:// is accepted only on loopback addresses, not {parts.hostname!r}")
        return url, False
    if parts.scheme != "https":
        raise CallFailed(f"unsupported URL scheme {parts.scheme!r}")
    ca = config.get("caBundle")
    if not ca:
        return url, True  # system trust store
    try:
        return url, ssl.create_default_context(cadata=base64.b64decode(ca).decode())
    except (ValueError, ssl.SSLError) as exc:
        raise CallFailed(f"invalid caBundle: {exc}") from None


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
    session: aiohttp.ClientSession, hook: dict[str, Any], review: dict[str, Any]
) -> dict[str, Any]:
    url, tls = _endpoint(hook)
    timeout = hook.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS
    try:
        async with session.post(
            url,
            data=dumps(review),
            headers={"Content-Type": "application/json", "Accept": "application/json"},
            ssl=tls,
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


async def admit_create(store: Store, rt: ResourceType, namespace: str, raw: bytes, dry_run: bool) -> bytes:
    """Run the matching mutating webhooks on a CREATE body; returns the (possibly patched) body.

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
    async with aiohttp.ClientSession() as session:
        for hook in matching:
            name = str(hook.get("name", ""))
            try:
                response = await _post(session, hook, build_review(rt, namespace, obj, dry_run))
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

"""The aiohttp application that speaks the Kubernetes REST protocol, and the threaded emulator.

Routing is done by hand (one catch-all route) so that every unknown path, wrong method or bad input
is answered with a Kubernetes ``Status`` rather than aiohttp's plain-text errors. All store access
happens on the server's event loop; handlers never await between reading and committing state, so
each write is atomic with respect to other requests and to watch registration.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import pathlib
import random
import re
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml
from aiohttp import web

from . import admission, errors, openapi, podlogs, printing, rbac, rbac_objects, resources, reviews, ssa
from .authn import ADMIN_TOKEN, TokenAuthority, UserInfo
from .errors import ApiError
from .faults import WRITE_METHODS, FaultInjector, WriteTally
from .patch import PatchDecodeError, PatchError, json_patch, merge_patch
from .protobuf import body_as_json, read_body
from .resources import EVENTS, NAMESPACES, PODS, SERVICEACCOUNTS, ResourceType
from .responses import error_response, json_response
from .selectors import FieldSelector, LabelSelector, SelectorError, _check_key, _check_value
from .store import ADDED, DELETED, MODIFIED, Store, Stored, decode_continue, dumps, encode_continue
from .tls import ServingCertificate, serving_certificate
from .watch import Watcher, error_line, run_watch

log = logging.getLogger(__name__)

SECURE_SERVER_EXTENSION = "simcluster.io/secure-server"
MAX_BODY = 3 * 1024 * 1024  # the apiserver's default request size limit
_META_PATHS = frozenset({"/version", "/healthz", "/readyz", "/livez"})
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's utilrand alphabet
_MERGE_TYPES = frozenset({"application/merge-patch+json", "application/strategic-merge-patch+json"})
_CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new "
    "list without the continue parameter, or use the continue token in this response to retrieve the "
    "remainder of the results. Continuing with the provided token results in an inconsistent list - objects "
    "that were created, modified, or deleted between the time the first chunk was returned and now may show "
    "up in the list."
)


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON value {name}")


def parse_json(raw: bytes, what: str = "the body of the request") -> Any:
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise errors.bad_request(f"{what} was in an unknown format; json parse error: {exc}") from None


def decode_body(raw: bytes, content_type: str, api_version: str, kind: str) -> dict[str, Any]:
    """The request body of a ``kind`` write as a JSON object: the one place a body is decoded for
    the review and TokenRequest endpoints; a protobuf body (kubectl 1.33's ``create token`` and
    ``auth can-i``) is decoded as ``kind`` first."""
    raw = body_as_json(content_type, raw, None, api_version=api_version, kind=kind)
    body = parse_json(raw) if raw.strip() else {}
    if not isinstance(body, dict):
        raise errors.bad_request(
            f"the body of the request must be a JSON object ({kind}), got {type(body).__name__}"
        )
    for key, want in (("apiVersion", api_version), ("kind", kind)):
        have = body.setdefault(key, want)
        if have != want:
            what = "API version" if key == "apiVersion" else "kind"
            raise errors.bad_request(
                f"the {what} in the data ({have}) does not match the expected {what} ({want})"
            )
    return body


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1")


def _int_param(query: Any, name: str) -> int | None:
    value = query.get(name)
    if value in (None, ""):
        return None
    try:
        out = int(value)
    except ValueError:
        raise errors.bad_request(f"invalid value for {name}: {value!r}: must be an integer") from None
    if out < 0:
        raise errors.bad_request(f"invalid value for {name}: {value!r}: must be non-negative")
    return out


def _rv_param(value: str) -> int:
    try:
        rv = int(value)
    except ValueError:
        rv = -1
    if rv < 0:
        raise errors.bad_request(f'invalid resource version "{value}"') from None
    return rv


@dataclass(frozen=True, slots=True)
class Target:
    rt: ResourceType
    namespace: str | None  # None = all namespaces; "" for cluster-scoped resources
    name: str | None
    sub: str | None

    @property
    def tally_plural(self) -> str:
        return f"{self.rt.plural}/{self.sub}" if self.sub else self.rt.plural


def parse_path(path: str, host: str) -> Target | dict[str, Any]:
    """Map a request path to a resource Target or a discovery document; 404 for anything else."""
    parts = [p for p in path.split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        raise errors.path_not_found()
    if parts[0] == "api":
        if len(parts) == 1:
            return resources.api_versions(host)
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) == 1:
            return resources.api_group_list()
        if len(parts) == 2:
            doc = resources.api_group(parts[1])
            if doc is None:
                raise errors.path_not_found()
            return doc
        group, version, rest = parts[1], parts[2], parts[3:]
    if (group, version) not in resources.BY_GROUP_VERSION:
        raise errors.path_not_found()
    if not rest:
        doc = resources.resource_list(group, version)
        assert doc is not None
        return doc
    namespace: str | None
    if rest[0] == "namespaces" and len(rest) >= 3 and not (group == "" and rest[2] in ("status", "finalize")):
        namespace, plural, tail = rest[1], rest[2], rest[3:]
        rt = resources.lookup(group, version, plural)
        if rt is None or not rt.namespaced:
            raise errors.path_not_found()
    else:
        plural, tail = rest[0], rest[1:]
        rt = resources.lookup(group, version, plural)
        if rt is None or (rt.namespaced and tail):
            raise errors.path_not_found()
        namespace = None if rt.namespaced else ""
    if len(tail) > 2 or (
        len(tail) == 2
        and not (tail[1] == "status" and rt.has_status)
        and not (tail[1] == "log" and rt is PODS)
        and not any(tail[1] == sub.name for sub in rt.subresources)
    ):
        raise errors.path_not_found()
    return Target(rt, namespace, tail[0] if tail else None, tail[1] if len(tail) == 2 else None)


# --- object validation ------------------------------------------------------------------------------


def _type_error(field: str, expected: str, value: Any) -> ApiError:
    got = type(value).__name__
    return errors.bad_request(f"json: cannot unmarshal {got} into Go struct field {field} of type {expected}")


def check_gvk(rt: ResourceType, obj: dict[str, Any], *, default: bool) -> None:
    for field, want in (("apiVersion", rt.api_version), ("kind", rt.kind)):
        have = obj.get(field)
        if have in (None, ""):
            if not default:
                raise errors.bad_request(
                    f"Object '{field[0].upper() + field[1:]}' is missing in '{dumps(obj)[:200].decode()}'"
                )
            obj[field] = want
        elif not isinstance(have, str):
            raise _type_error(field, "string", have)
        elif have != want:
            what = "API version" if field == "apiVersion" else "kind"
            raise errors.bad_request(
                f"the {what} in the data ({have}) does not match the expected {what} ({want})"
            )


def check_types(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """Reject values Go's decoder would refuse (400) and drop JSON nulls like Go's zero values."""
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise _type_error("metadata", "v1.ObjectMeta", meta)
    for key in [k for k, v in meta.items() if v is None]:
        del meta[key]
    for key in ("name", "generateName", "namespace", "resourceVersion", "uid", "creationTimestamp"):
        if key in meta and not isinstance(meta[key], str):
            raise _type_error(f"ObjectMeta.metadata.{key}", "string", meta[key])
    for key in ("labels", "annotations"):
        if key in meta:
            value = meta[key]
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise _type_error(f"ObjectMeta.metadata.{key}", "map[string]string", value)
    if "finalizers" in meta and (
        not isinstance(meta["finalizers"], list) or not all(isinstance(f, str) for f in meta["finalizers"])
    ):
        raise _type_error("ObjectMeta.metadata.finalizers", "[]string", meta["finalizers"])
    for key in ("spec", "status"):
        if key in obj and obj[key] is None:
            del obj[key]
        elif key in obj and (rt.has_status or rt.has_generation) and not isinstance(obj[key], dict):
            raise _type_error(f"{rt.kind}.{key}", "object", obj[key])
    if rt.kind == "ConfigMap":
        for key in ("data", "binaryData"):
            value = obj.get(key)
            if value is not None and (
                not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values())
            ):
                raise _type_error(f"ConfigMap.{key}", "map[string]string", value)
    return meta


def validate_meta(rt: ResourceType, meta: dict[str, Any]) -> None:
    """Field validation that the apiserver answers with 422 Invalid."""
    name = meta.get("name", "")
    causes: list[dict[str, str]] = []
    if not name:
        causes.append(
            {
                "reason": "FieldValueRequired",
                "message": "Required value: name or generateName is required",
                "field": "metadata.name",
            }
        )
    else:
        label_only = rt is NAMESPACES
        pattern, limit = (_DNS1123_LABEL, 63) if label_only else (_DNS1123_SUBDOMAIN, 253)
        if len(name) > limit or not pattern.match(name):
            kind = "label" if label_only else "subdomain"
            chars = "" if label_only else " or '.'"
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": (
                        f'Invalid value: "{name}": a lowercase RFC 1123 {kind} must consist of lower case '
                        f"alphanumeric characters, '-'{chars}, and must "
                        f"start and end with an alphanumeric character (at most {limit} characters)"
                    ),
                    "field": "metadata.name",
                }
            )
    for key, value in (meta.get("labels") or {}).items():
        try:
            _check_key(key)
            _check_value(value)
        except SelectorError as exc:
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": f"Invalid value: {exc!s}",
                    "field": "metadata.labels",
                }
            )
    if causes:
        raise errors.invalid(rt.kind, rt.group, name, causes)


def _default_queue() -> dict[str, Any]:
    """The queue Volcano creates at install time; jobs name it in ``schedulingPolicy.queue``."""
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {
            "name": "default",
            "uid": str(uuid.uuid4()),
            "creationTimestamp": now_rfc3339(),
            "generation": 1,
        },
        "spec": {"reclaimable": True, "weight": 1},
        "status": {"state": "Open"},
    }


# --- OpenAPI, tables, field validation ---------------------------------------------------------------


def openapi_response(request: web.Request) -> web.Response:
    if request.method not in ("GET", "HEAD"):
        raise errors.method_not_allowed()
    path = request.path.rstrip("/")
    if path == "/openapi/v2":
        accept = request.headers.get("Accept", "")
        if "protobuf" in accept and "json" not in accept:
            # client-go's OpenAPISchema asks for gnostic's protobuf only.
            resp = web.Response(body=openapi.v2_protobuf(), status=200)
            resp.headers["Content-Type"] = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
            return resp
        return json_response(200, openapi.v2_document())
    if path == "/openapi/v3":
        return json_response(200, openapi.v3_index())
    parts = path.split("/")[3:]
    if parts[:1] == ["api"] and len(parts) == 2:
        raw = openapi.v3_document("", parts[1])
    elif parts[:1] == ["apis"] and len(parts) == 3:
        raw = openapi.v3_document(parts[1], parts[2])
    else:
        raw = None
    if raw is None:
        raise errors.path_not_found()
    return json_response(
        200, raw, headers={"Cache-Control": "public, immutable"} if request.query.get("hash") else None
    )


def as_table(request: web.Request, t: Target, resp: web.Response) -> web.Response:
    """Re-render a GET/list answer as a meta.k8s.io Table when the client asked for one."""
    accept = request.headers.get("Accept")
    if not printing.wants_table(accept) or resp.status != 200:
        return resp
    if not isinstance(resp.body, bytes):
        return resp  # only a JSON body we wrote ourselves can be re-rendered
    doc = json.loads(resp.body)
    items = doc.get("items") if t.name is None else [doc]
    list_meta = (
        doc.get("metadata", {})
        if t.name is None
        else {"resourceVersion": doc["metadata"].get("resourceVersion")}
    )
    table = printing.table(
        items or [],
        t.rt.kind,
        crd_printer_columns=openapi.printer_columns(t.rt),
        list_meta={
            k: v for k, v in list_meta.items() if k in ("resourceVersion", "continue", "remainingItemCount")
        },
        include_object=request.query.get("includeObject", "Metadata"),
        api_version=printing.table_version(accept),
    )
    return json_response(200, dumps(table))


def table_line_transform(request: web.Request, rt: ResourceType) -> Any:
    """For ``kubectl get -w``: every watch event's object becomes a one-row Table."""
    accept = request.headers.get("Accept")
    if not printing.wants_table(accept):
        return None
    include = request.query.get("includeObject", "Metadata")
    version = printing.table_version(accept)
    columns = openapi.printer_columns(rt)

    def transform(line: bytes) -> bytes:
        event = json.loads(line)
        obj = event.get("object") or {}
        if event.get("type") in ("ADDED", "MODIFIED", "DELETED") and obj.get("kind") == rt.kind:
            event["object"] = printing.table(
                [obj],
                rt.kind,
                crd_printer_columns=columns,
                list_meta={"resourceVersion": obj["metadata"].get("resourceVersion")},
                include_object=include,
                api_version=version,
            )
        return dumps(event) + b"\n"

    return transform


_DIRECTIVES = ("Ignore", "Warn", "Strict")


def field_validation(rt: ResourceType, obj: dict[str, Any], query: Any, headers: dict[str, str]) -> None:
    """``?fieldValidation=`` as the apiserver applies it (default Warn): unknown fields → 400 under
    Strict, a ``Warning`` header under Warn; CRD type / required errors → 422 always."""
    directive = query.get("fieldValidation") or "Warn"
    if directive not in _DIRECTIVES:
        raise errors.bad_request(
            f'fieldValidation: Unsupported value: "{directive}": supported values: "Ignore", "Strict", "Warn"'
        )
    problems = openapi.check(rt, obj)
    if problems.invalid:
        name = (obj.get("metadata") or {}).get("name", "")
        raise errors.invalid(rt.kind, rt.group, name, problems.invalid)
    if not problems.unknown:
        return
    if directive == "Strict":
        text = ", ".join(f'unknown field "{p}"' for p in problems.unknown)
        raise errors.bad_request(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
            f"strict decoding error: {text}"
        )
    if directive == "Warn":
        safe = [json.dumps(p, ensure_ascii=True)[1:-1].replace('"', "'") for p in problems.unknown[:20]]
        headers["Warning"] = ", ".join(f'299 - "unknown field \\"{p}\\""' for p in safe)
    if not rt.builtin and query.get("fieldValidation"):
        # CRD pruning (structural schema). Only when the client chose a directive (kubectl always
        # does): the emulator's generic API tests store schema-less fields in AscendJobs.
        openapi.prune(obj, problems.unknown)


def _with_headers(resp: web.Response, headers: dict[str, str]) -> web.Response:
    for key, value in headers.items():
        resp.headers[key] = value
    return resp


# --- the API server -----------------------------------------------------------------------------


class ApiServer:
    def __init__(
        self,
        store: Store,
        faults: FaultInjector,
        bookmark_interval: float = 60.0,
        watch_queue_limit: int = 10_000,
        admission_config: str | None = None,
    ) -> None:
        self.store = store
        self.faults = faults
        # The AdmissionConfiguration file (kube-apiserver's --admission-control-config-file); None:
        # the SIMCLUSTER_ADMISSION_CONFIG environment variable's, read per call (admission.py).
        self.admission_config = admission_config
        self.bookmark_interval = bookmark_interval
        self.watch_queue_limit = watch_queue_limit
        self._manager = "unknown"
        # (namespace, pod name) → earlier incarnations of that pod, for ``logs --previous``.
        self.pod_history: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.tokens = TokenAuthority(store)
        self.authorizer = rbac.Authorizer(store)
        for ns in ("default", "kube-system", "mindx-dl"):
            self.store.commit(NAMESPACES, ADDED, self._new_namespace(ns))
        self.store.commit(resources.QUEUES, ADDED, _default_queue())
        for rt, obj in rbac_objects.bootstrap_objects(now_rfc3339()):
            self.store.commit(rt, ADDED, obj)

    @staticmethod
    def _new_namespace(name: str) -> dict[str, Any]:
        return {
            "kind": "Namespace",
            "apiVersion": "v1",
            "metadata": {
                "name": name,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": now_rfc3339(),
                "labels": {"kubernetes.io/metadata.name": name},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    def close_watches(self) -> None:
        for watchers in self.store.watchers.values():
            for w in tuple(watchers):
                w.close()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._handle(request)
        except ApiError as err:
            return error_response(err)
        except web.HTTPException as exc:
            # e.g. 413 from request.read(): keep the Status shape.
            return error_response(ApiError(exc.status, exc.reason or exc.text or "request failed"))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # never leak a traceback body
            log.exception("kubeapi emulator internal error on %s %s", request.method, request.path)
            return error_response(ApiError(500, f"Internal error occurred: {type(exc).__name__}"))

    def _authenticate_and_authorize(self, request: web.Request) -> UserInfo:
        """401 for a bad token, 403 for a request RBAC does not allow - before anything is served,
        so a watch is authorized before it streams (the apiserver's filter chain order)."""
        user = self.tokens.authenticate(request.headers.get("Authorization"), secure=request.secure)
        self.authorizer.require(rbac.request_attributes(request.method, request.path, request.query, user))
        return user

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path, method = request.path, request.method
        if path.startswith("/_sim/"):  # the emulator's own control endpoints, not Kubernetes
            return await self._meta(request)
        user = self._authenticate_and_authorize(request)
        if path.rstrip("/") in _META_PATHS:
            return await self._meta(request)
        if path == "/openapi" or path.startswith("/openapi/"):
            return openapi_response(request)
        target: Target | dict[str, Any] | None = None
        failure: ApiError | None = None
        try:
            target = parse_path(path, request.host)
        except ApiError as err:
            failure = err
        plural = target.rt.plural if isinstance(target, Target) else None
        if method in WRITE_METHODS and isinstance(target, Target):
            self.faults.writes.record(method, target.tally_plural, target.namespace or "", target.name)
        decision = self.faults.decide(method, plural)
        if decision.drop:
            if request.transport is not None:
                request.transport.abort()
            # Nothing can be written to an aborted transport; aiohttp discards this response.
            return web.Response(status=499)
        if decision.delay:
            await asyncio.sleep(decision.delay)
        if decision.status is not None:
            if decision.status == 409 and isinstance(target, Target):
                injected = errors.conflict(target.rt.plural, target.rt.group, target.name or "")
            else:
                injected = ApiError(decision.status, decision.message or "injected failure")
            if decision.retry_after is not None:
                injected.headers["Retry-After"] = str(decision.retry_after)
                injected.details = {"retryAfterSeconds": decision.retry_after}
            raise injected
        if failure is not None:
            raise failure
        if not isinstance(target, Target):
            if method not in ("GET", "HEAD"):
                raise errors.method_not_allowed()
            return json_response(200, dumps(target))
        return await self._dispatch(request, target, user)

    async def _meta(self, request: web.Request) -> web.StreamResponse:
        path, method = request.path.rstrip("/") or "/", request.method
        if path in _META_PATHS:
            if method not in ("GET", "HEAD"):
                raise errors.method_not_allowed()
            if path == "/version":
                return json_response(200, dumps(resources.version_info()))
            return web.Response(text="ok", content_type="text/plain")
        if path == "/_sim/faults":
            if method == "POST":
                spec = parse_json(await request.read())
                if not isinstance(spec, dict):
                    raise errors.bad_request("fault spec must be a JSON object with an 'action'")
                try:
                    self.faults.apply(spec)
                except (TypeError, ValueError) as exc:
                    raise errors.bad_request(f"bad fault spec: {exc}") from None
            elif method == "DELETE":
                self.faults.clear()
            elif method != "GET":
                raise errors.method_not_allowed()
            return json_response(200, dumps(self.faults.state()))
        if path == "/_sim/compact" and method == "POST":
            self.store.compact()
            return json_response(200, dumps({"resourceVersion": str(self.store.rv)}))
        if path == "/_sim/stats" and method == "GET":
            return json_response(
                200,
                dumps(
                    {
                        "resourceVersion": str(self.store.rv),
                        "oldestRetainedResourceVersion": str(self.store.min_rv),
                        "watchers": sum(len(w) for w in self.store.watchers.values()),
                        "writes": self.faults.writes.as_json(),
                        "committed": self.faults.committed.as_json(),
                    }
                ),
            )
        raise errors.path_not_found()

    async def _dispatch(self, request: web.Request, t: Target, user: UserInfo) -> web.StreamResponse:
        method, query = request.method, request.query
        # Handlers run on one loop without awaiting between read and commit, so this is safe.
        self._manager = query.get("fieldManager") or ssa.manager_from_user_agent(
            request.headers.get("User-Agent")
        )
        if not t.rt.stored:
            if method != "POST":
                raise errors.method_not_allowed()
            body = decode_body(await request.read(), request.content_type, t.rt.api_version, t.rt.kind)
            return json_response(201, dumps(reviews.answer(t.rt, self.authorizer, user, body)))
        if t.sub is not None and t.rt is SERVICEACCOUNTS:
            if method != "POST":
                raise errors.method_not_allowed()
            assert t.name is not None and t.namespace is not None
            raw = await request.read()
            body = decode_body(raw, request.content_type, "authentication.k8s.io/v1", "TokenRequest")
            return json_response(201, dumps(self.tokens.token_request(t.namespace, t.name, body)))
        if t.name is None:
            if method in ("GET", "HEAD"):
                if _truthy(query.get("watch")):
                    return await self.watch(request, t)
                return as_table(request, t, self.list(t, query))
            if t.namespace is None:
                raise errors.method_not_allowed()
            if method == "POST":
                raw = await admission.admit_create(
                    self.store,
                    t.rt,
                    t.namespace,
                    await read_body(request, t.rt),
                    bool(query.get("dryRun")),
                    self.admission_config,
                )
                return self.create(t, raw, query)
            if method == "DELETE":
                return self.delete_collection(t, await read_body(request, t.rt), query)
            raise errors.method_not_allowed()
        if method in ("GET", "HEAD") and t.sub == "log":
            return await podlogs.serve(request, self.store, t.namespace or "", t.name, self.pod_history)
        if method in ("GET", "HEAD"):
            return as_table(request, t, json_response(200, self._existing(t).raw))
        if method == "PUT":
            return self.replace(t, await read_body(request, t.rt), query)
        if method == "PATCH":
            return self.patch(t, request.content_type, await request.read(), query)
        if method == "DELETE" and t.sub is None:
            return self.delete(t, await read_body(request, t.rt), query)
        raise errors.method_not_allowed()

    # --- helpers -------------------------------------------------------------------------------

    def _existing(self, t: Target) -> Stored:
        assert t.name is not None and t.namespace is not None
        stored = self.store.get(t.rt, t.namespace, t.name)
        if stored is None:
            raise errors.not_found(t.rt.plural, t.rt.group, t.name)
        return stored

    def _require_namespace(self, ns: str) -> None:
        if self.store.get(NAMESPACES, "", ns) is None:
            raise errors.not_found("namespaces", "", ns)

    def _selectors(self, t: Target, query: Any) -> tuple[LabelSelector, FieldSelector]:
        try:
            return (
                LabelSelector.parse(query.get("labelSelector")),
                FieldSelector.parse(query.get("fieldSelector"), t.rt.selectable_fields),
            )
        except SelectorError as exc:
            raise errors.bad_request(str(exc)) from None

    def _committed(self, verb: str, t: Target, name: str) -> None:
        self.faults.committed.record(verb, t.tally_plural, t.namespace or "", name)

    # --- read verbs ----------------------------------------------------------------------------

    def list(self, t: Target, query: Any) -> web.Response:
        labels, fields = self._selectors(t, query)
        limit = _int_param(query, "limit") or 0
        token, rv_param, match = (
            query.get("continue"),
            query.get("resourceVersion"),
            query.get("resourceVersionMatch"),
        )
        if match and not rv_param:
            raise errors.bad_request("resourceVersionMatch is forbidden unless resourceVersion is provided")
        if match not in (None, "", "Exact", "NotOlderThan"):
            raise errors.bad_request(f'resourceVersionMatch: Unsupported value: "{match}"')
        start_after: tuple[str, str] | None = None
        if token:
            if rv_param:
                raise errors.bad_request("specifying resource version is not allowed when using continue")
            rv, start_after = decode_continue(token)
            items = self.store.snapshot(t.rt, t.namespace, rv, why=_CONTINUE_EXPIRED)
        elif rv_param and match == "Exact":
            rv = _rv_param(rv_param)
            items = self.store.snapshot(
                t.rt, t.namespace, rv, why=f"too old resource version: {rv} ({self.store.min_rv + 1})"
            )
        else:
            if rv_param:
                _rv_param(rv_param)
            rv = self.store.rv
            indexed = next((r for r in labels.requirements if r.op in ("=", "in")), None)
            if indexed is not None:  # only narrows: the whole selector is applied below
                items = self.store.labelled(t.rt, t.namespace, indexed.key, indexed.values)
            else:
                items = self.store.current(t.rt, t.namespace)
        if start_after is not None:
            items = [s for s in items if s.key > start_after]
        filtered = not (labels.empty and fields.empty)
        if filtered:
            items = [
                s
                for s in items
                if (labels.empty or labels.matches(s.obj["metadata"].get("labels"))) and fields.matches(s.obj)
            ]
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit and len(items) > limit:
            remaining = len(items) - limit
            items = items[:limit]
            meta["continue"] = encode_continue(rv, items[-1].key)
            if not filtered:
                meta["remainingItemCount"] = remaining
        head = dumps({"apiVersion": t.rt.api_version, "kind": t.rt.list_kind, "metadata": meta})
        raw = head[:-1] + b',"items":[' + b",".join(s.raw for s in items) + b"]}"
        return json_response(200, raw)

    async def watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        query = request.query
        labels, fields = self._selectors(t, query)
        timeout = _int_param(query, "timeoutSeconds")
        bookmarks = _truthy(query.get("allowWatchBookmarks"))
        rv_param = query.get("resourceVersion")
        watcher = Watcher(t.rt, t.namespace, labels, fields, self.watch_queue_limit)
        watcher.transform = table_line_transform(request, t.rt)
        initial: list[bytes] = []
        if rv_param in (None, "", "0"):
            for s in self.store.current(t.rt, t.namespace):
                if watcher.matches(s.obj):
                    initial.append(watcher.render(b'{"type":"ADDED","object":' + s.raw + b"}\n"))
        else:
            rv = _rv_param(rv_param)
            try:
                changes = self.store.changes_since(rv)
            except ApiError as err:
                # The apiserver reports an expired watch inside a 200 stream, not as an HTTP error.
                initial = [error_line(err)]
                watcher.closed = True
            else:
                for change in changes:
                    if change.rt is t.rt:
                        etype = watcher.event_type(change)
                        if etype is not None:
                            initial.append(watcher.render(change.line(etype)))
        if not watcher.closed:
            self.store.watchers[t.rt].add(watcher)
        try:
            resp = web.StreamResponse(
                status=200, headers={"Content-Type": "application/json", "Cache-Control": "no-cache, private"}
            )
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            if watcher.closed:
                with contextlib.suppress(ConnectionError, RuntimeError):
                    await resp.write(b"".join(initial))
            else:
                await run_watch(
                    request,
                    resp,
                    watcher,
                    self.store,
                    initial,
                    timeout,
                    self.bookmark_interval if bookmarks else None,
                )
        finally:
            watcher.closed = True
            self.store.watchers[t.rt].discard(watcher)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await resp.write_eof()
        return resp

    # --- write verbs ---------------------------------------------------------------------------

    def _decode_object(
        self, t: Target, raw: bytes, *, default_gvk: bool
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        body = parse_json(raw)
        if not isinstance(body, dict):
            raise errors.bad_request(
                f"the body of the request must be a JSON object ({t.rt.kind}), got {type(body).__name__}"
            )
        check_gvk(t.rt, body, default=default_gvk and t.rt.builtin)
        meta = check_types(t.rt, body)
        if t.rt.namespaced:
            ns = meta.get("namespace")
            if ns and ns != t.namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
        return body, meta

    def create(self, t: Target, raw: bytes, query: Any) -> web.Response:
        body, meta = self._decode_object(t, raw, default_gvk=True)
        headers: dict[str, str] = {}
        field_validation(t.rt, body, query, headers)
        return _with_headers(self._create_object(t, body, meta, query), headers)

    def _create_object(
        self,
        t: Target,
        body: dict[str, Any],
        meta: dict[str, Any],
        query: Any,
        applied: dict[str, Any] | None = None,
    ) -> web.Response:
        rt = t.rt
        assert t.namespace is not None
        if rt.namespaced:
            self._require_namespace(t.namespace)
            meta["namespace"] = t.namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            prefix = meta["generateName"][:58]
            for _ in range(100):
                name = prefix + "".join(random.choices(_SUFFIX_CHARS, k=5))
                if self.store.get(rt, t.namespace, name) is None:
                    break
            meta["name"] = name
        validate_meta(rt, meta)
        rbac_objects.validate(rt, body, None)
        name = meta["name"]
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        if self.store.get(rt, t.namespace, name) is not None:
            raise errors.already_exists(rt.plural, rt.group, name)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "generation", "resourceVersion"):
            meta.pop(key, None)
        if rt.has_generation:
            meta["generation"] = 1
        # Status is server-owned on create, as the real registry strategies do.
        if rt is PODS:
            body["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        elif rt is NAMESPACES:
            body["status"] = {"phase": "Active"}
            body.setdefault("spec", {"finalizers": ["kubernetes"]})
        elif rt.has_status:
            body.pop("status", None)
        if applied is not None:
            ssa.record(None, body, self._manager, "Apply", rt.api_version, applied)
        else:
            ssa.record(None, body, self._manager, "Update", rt.api_version)
        if query.get("dryRun"):
            meta["resourceVersion"] = str(self.store.rv)
            return json_response(201, dumps(body))
        change = self.store.commit(rt, ADDED, body)
        self._committed("POST", t, name)
        return json_response(201, change.obj.raw)

    def replace(self, t: Target, raw: bytes, query: Any) -> web.Response:
        body, meta = self._decode_object(t, raw, default_gvk=True)
        assert t.name is not None
        if meta.get("name", t.name) != t.name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({t.name})"
            )
        old = self._existing(t)
        headers: dict[str, str] = {}
        if t.sub is None:
            field_validation(t.rt, body, query, headers)
            ssa.record(old.obj, body, self._manager, "Update", t.rt.api_version)
        return _with_headers(self._update(t, old, body, "PUT", query), headers)

    def patch(self, t: Target, content_type: str, raw: bytes, query: Any) -> web.Response:
        rt = t.rt
        assert t.name is not None and t.namespace is not None
        old = self.store.get(rt, t.namespace, t.name)
        if content_type in _MERGE_TYPES or content_type == "application/json-patch+json":
            patch_doc = parse_json(raw)
            if old is None:
                raise errors.not_found(rt.plural, rt.group, t.name)
            try:
                if content_type == "application/json-patch+json":
                    doc = json_patch(old.copy(), patch_doc)
                else:
                    if not isinstance(patch_doc, dict):
                        raise errors.bad_request("merge patch must be a JSON object")
                    doc = merge_patch(old.copy(), patch_doc)
            except PatchDecodeError as exc:
                raise errors.bad_request(
                    f"the server rejected our request due to an error in our request: {exc}"
                ) from None
            except PatchError as exc:
                raise ApiError(422, str(exc), reason="Invalid") from None
        elif content_type == "application/apply-patch+yaml":
            if not query.get("fieldManager"):
                raise errors.bad_request(
                    "PATCH requests with apply content type require fieldManager query param"
                )
            try:
                applied = yaml.safe_load(raw)
            except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
                raise errors.bad_request(f"error decoding YAML: {exc}") from None
            if not isinstance(applied, dict):
                raise errors.bad_request("apply patch must be a YAML/JSON object")
            applied = json.loads(dumps(applied))  # normalise YAML-only types (dates, ...) to JSON
            check_gvk(rt, applied, default=False)
            meta = check_types(rt, applied)
            if meta.get("name", t.name) != t.name:
                raise errors.bad_request("the name of the object does not match the name on the URL")
            meta["name"] = t.name
            headers: dict[str, str] = {}
            if t.sub is None:
                field_validation(rt, applied, query, headers)
            if old is None:  # server-side apply creates missing objects
                body = json.loads(dumps(applied))
                return _with_headers(self._create_object(t, body, body["metadata"], query, applied), headers)
            if t.sub is None:
                found = ssa.conflicts(old.obj, applied, self._manager)
                if found and not _truthy(query.get("force")):
                    raise ApiError(
                        409,
                        ssa.conflict_message(found, rt.api_version),
                        reason="Conflict",
                        details={
                            "name": t.name,
                            "group": rt.group,
                            "kind": rt.plural,
                            "causes": [
                                {
                                    "reason": "FieldManagerConflict",
                                    "message": f'conflict with "{m}"',
                                    "field": "." + ".".join(p),
                                }
                                for m, p in found
                            ],
                        },
                    )
                doc = ssa.apply(old.obj, applied, self._manager)
                ssa.record(old.obj, doc, self._manager, "Apply", rt.api_version, applied)
            else:
                doc = merge_patch(old.copy(), applied)
            meta = check_types(rt, doc)
            return _with_headers(self._update(t, old, doc, "PATCH", query), headers)
        else:
            raise errors.unsupported_media_type(content_type)
        if old is None:
            raise errors.not_found(rt.plural, rt.group, t.name)
        if not isinstance(doc, dict):
            raise ApiError(422, "patched object is not a JSON object", reason="Invalid")
        if doc.get("apiVersion") != rt.api_version or doc.get("kind") != rt.kind:
            raise errors.bad_request("a patch may not change apiVersion or kind")
        meta = check_types(rt, doc)
        if meta.get("name") != t.name or (rt.namespaced and meta.get("namespace") != t.namespace):
            raise errors.bad_request("a patch may not change metadata.name or metadata.namespace")
        headers = {}
        if t.sub is None:
            field_validation(rt, doc, query, headers)
            ssa.record(old.obj, doc, self._manager, "Update", rt.api_version)
        return _with_headers(self._update(t, old, doc, "PATCH", query), headers)

    def _update(self, t: Target, old: Any, new: dict[str, Any], verb: str, query: Any) -> web.Response:
        """Shared PUT/PATCH path: preconditions, status isolation, generation, no-op detection."""
        rt = t.rt
        old_obj: dict[str, Any] = old.obj
        om: dict[str, Any] = old_obj["metadata"]
        nm: dict[str, Any] = new["metadata"]
        assert t.name is not None
        rv = nm.get("resourceVersion")
        if rv and rv != om["resourceVersion"]:
            raise errors.conflict(rt.plural, rt.group, t.name)
        uid = nm.get("uid")
        if uid and uid != om["uid"]:
            raise errors.conflict(
                rt.plural,
                rt.group,
                t.name,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {om['uid']}",
            )
        if t.sub == "status":
            result = old.copy()
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
        else:
            result = new
            for key in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "namespace",
                "name",
            ):
                if key in om:
                    nm[key] = om[key]
                else:
                    nm.pop(key, None)
            if rt.has_status:
                if "status" in old_obj:
                    result["status"] = old_obj["status"]
                else:
                    result.pop("status", None)
            validate_meta(rt, nm)
            rbac_objects.validate(rt, result, old_obj)
            if rt.has_generation and result.get("spec") != old_obj.get("spec"):
                nm["generation"] = int(om.get("generation", 1)) + 1
        result["metadata"]["resourceVersion"] = om["resourceVersion"]
        if result == old_obj:
            return json_response(200, old.raw)  # no-op: no new resourceVersion, no watch event
        if query.get("dryRun"):
            return json_response(200, dumps(result))
        if om.get("deletionTimestamp") and not result["metadata"].get("finalizers"):
            change = self.store.commit(rt, DELETED, result)  # last finalizer removed: object goes away
        else:
            change = self.store.commit(rt, MODIFIED, result)
        self._committed(verb, t, t.name)
        return json_response(200, change.obj.raw)

    def _delete_options(self, raw: bytes) -> dict[str, Any]:
        if not raw.strip():
            return {}
        opts = parse_json(raw)
        if not isinstance(opts, dict) or not isinstance(opts.get("preconditions") or {}, dict):
            raise errors.bad_request("the body of the request must be a DeleteOptions object")
        return opts

    def delete(self, t: Target, raw: bytes, query: Any) -> web.Response:
        opts = self._delete_options(raw)
        old = self._existing(t)
        rt, om = t.rt, old.obj["metadata"]
        assert t.name is not None and t.namespace is not None
        pre = opts.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != om["uid"]:
            raise errors.conflict(
                rt.plural,
                rt.group,
                t.name,
                f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {om['uid']}",
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != om["resourceVersion"]:
            raise errors.conflict(
                rt.plural,
                rt.group,
                t.name,
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                f"ResourceVersion in object meta: {om['resourceVersion']}",
            )
        if query.get("dryRun") or opts.get("dryRun"):
            return json_response(200, old.raw)
        obj = old.copy()
        if om.get("finalizers"):
            # Finalizers pending: mark for deletion, answer 202 with the object (as the registry does).
            if not om.get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = now_rfc3339()
                obj["metadata"]["deletionGracePeriodSeconds"] = 0
                change = self.store.commit(rt, MODIFIED, obj)
                self._committed("DELETE", t, t.name)
                return json_response(202, change.obj.raw)
            return json_response(202, old.raw)
        if rt is NAMESPACES:
            self._purge_namespace(t.name)
            obj["metadata"]["deletionTimestamp"] = now_rfc3339()
            obj.setdefault("status", {})["phase"] = "Terminating"
        change = self.store.commit(rt, DELETED, obj)
        self._committed("DELETE", t, t.name)
        if rt is PODS:
            self._pod_deleted(change.obj.obj)
        if rt.returns_deleted_object:
            return json_response(200, change.obj.raw)
        details: dict[str, Any] = {"name": t.name, "kind": rt.plural, "uid": om["uid"]}
        if rt.group:
            details["group"] = rt.group
        return json_response(
            200,
            dumps(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": details,
                }
            ),
        )

    def _pod_deleted(self, pod: dict[str, Any]) -> None:
        """What the kubelet does when a pod goes: a ``Killing`` event, and (here) its log kept."""
        meta = pod["metadata"]
        now = now_rfc3339()
        history = self.pod_history.setdefault((meta.get("namespace", ""), meta["name"]), [])
        history.append(
            {**pod, "metadata": {**meta, "deletionTimestamp": meta.get("deletionTimestamp") or now}}
        )
        del history[:-3]
        for container in (pod.get("spec") or {}).get("containers") or []:
            event = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {
                    "name": f"{meta['name']}.{uuid.uuid4().hex[:16]}",
                    "namespace": meta.get("namespace", "default"),
                    "uid": str(uuid.uuid4()),
                    "creationTimestamp": now,
                },
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "namespace": meta.get("namespace", "default"),
                    "uid": meta.get("uid"),
                    "fieldPath": f"spec.containers{{{container.get('name')}}}",
                },
                "reason": "Killing",
                "message": f"Stopping container {container.get('name')}",
                "type": "Normal",
                "source": {"component": "kubelet", "host": (pod.get("spec") or {}).get("nodeName", "")},
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
                "reportingComponent": "kubelet",
            }
            if self.store.get(NAMESPACES, "", meta.get("namespace", "default")) is not None:
                self.store.commit(EVENTS, ADDED, event)

    def _purge_namespace(self, ns: str) -> None:
        # The namespace controller's cascade, done synchronously.
        for rt in resources.ALL:
            if rt.namespaced:
                for stored in self.store.current(rt, ns):
                    self.store.commit(rt, DELETED, stored.copy())

    def delete_collection(self, t: Target, raw: bytes, query: Any) -> web.Response:
        self._delete_options(raw)
        labels, fields = self._selectors(t, query)
        deleted: list[bytes] = []
        for stored in self.store.current(t.rt, t.namespace):
            if labels.matches(stored.obj["metadata"].get("labels")) and fields.matches(stored.obj):
                if query.get("dryRun"):
                    deleted.append(stored.raw)
                    continue
                change = self.store.commit(t.rt, DELETED, stored.copy())
                self._committed("DELETE", t, change.name)
                deleted.append(change.obj.raw)
        head = dumps(
            {
                "apiVersion": t.rt.api_version,
                "kind": t.rt.list_kind,
                "metadata": {"resourceVersion": str(self.store.rv)},
            }
        )
        return json_response(200, head[:-1] + b',"items":[' + b",".join(deleted) + b"]}")


# --- running it ---------------------------------------------------------------------------------


def _bound_port(site: web.TCPSite, asked: int) -> int:
    server = site._server  # the asyncio server: the only place the port picked for 0 is known
    sockets = getattr(server, "sockets", None) or []
    for sock in sockets:
        return int(sock.getsockname()[1])
    return asked


async def _start_site(
    api: ApiServer, host: str, port: int, tls: ServingCertificate | None = None, secure_port: int = 0
) -> tuple[web.AppRunner, int, int]:
    """Serve ``api`` on HTTP ``port`` and, with ``tls``, on HTTPS ``secure_port``; the bound ports."""
    runner = web.AppRunner(api.app(), access_log=None, handler_cancellation=True, shutdown_timeout=2.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound_secure = 0
    if tls is not None:
        secure = web.TCPSite(runner, host, secure_port, ssl_context=tls.context)
        await secure.start()
        bound_secure = _bound_port(secure, secure_port)
    return runner, _bound_port(site, port), bound_secure


async def serve(
    host: str = "127.0.0.1",
    port: int = 6443,
    history_limit: int = 10_000,
    bookmark_interval: float = 60.0,
    watch_queue_limit: int = 10_000,
) -> None:
    """Run an emulator in the current event loop until cancelled (for a management command)."""
    api = ApiServer(Store(history_limit), FaultInjector(), bookmark_interval, watch_queue_limit)
    runner, bound, _ = await _start_site(api, host, port)
    log.info("kubeapi emulator listening on http://%s:%d", host, bound)
    try:
        await asyncio.Event().wait()
    finally:
        api.close_watches()
        await runner.cleanup()


class KubeApiEmulator:
    """A Kubernetes API server emulator on its own thread and event loop.

    ``faults`` (and ``stats``, its write tally) may be used from any thread; everything else in the
    store runs on the emulator's loop - use :meth:`call` to run a function there.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        history_limit: int = 10_000,
        bookmark_interval: float | None = None,
        watch_queue_limit: int = 10_000,
        admission_config: str | None = None,
    ) -> None:
        if bookmark_interval is None:
            # kube-apiserver's watch cache sends a bookmark about once a minute (and 2 s before a
            # watch's deadline): staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go,
            # defaultBookmarkFrequency = time.Minute. Frequent bookmarks would let the ingester's
            # reorder buffer release items sooner than on a real cluster (README, "Storm").
            bookmark_interval = float(os.environ.get("SIM_BOOKMARK_SECONDS", "60"))
        self.host = host
        self.port = port
        self.secure_port = 0
        self.tls = serving_certificate(host)
        self.faults = FaultInjector()
        self.store = Store(history_limit)
        self.api = ApiServer(
            self.store, self.faults, bookmark_interval, watch_queue_limit, admission_config=admission_config
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stopped = False

    @property
    def url(self) -> str:
        """The plain-HTTP port (no credentials = cluster-admin, like the old insecure port)."""
        return f"http://{self.host}:{self.port}"

    @property
    def secure_url(self) -> str:
        """The HTTPS port (no credentials = ``system:anonymous``); its CA is ``tls.ca_data``."""
        return f"https://{self.host}:{self.secure_port}"

    @property
    def stats(self) -> WriteTally:
        """Write requests received per (verb, plural, namespace, name) - same object as faults.writes."""
        return self.faults.writes

    def start(self) -> KubeApiEmulator:
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run, name="kubeapi-emulator", daemon=True)
        self._thread.start()
        self._ready.wait(timeout=30)
        if self._error is not None:
            raise RuntimeError(f"kubeapi emulator failed to start: {self._error}") from self._error
        if not self._ready.is_set():
            raise RuntimeError("kubeapi emulator did not start within 30s")
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            self._runner, self.port, self.secure_port = loop.run_until_complete(
                _start_site(self.api, self.host, self.port, self.tls)
            )
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def call(self, fn: Any, *args: Any, timeout: float = 10.0) -> Any:
        """Run ``fn(*args)`` on the emulator loop (the only place the store may be touched)."""
        if self._loop is None or not self._loop.is_running():
            return fn(*args)

        async def runner() -> Any:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(runner(), self._loop).result(timeout)

    def compact(self) -> None:
        """Drop retained watch history: older resourceVersions now yield 410 Gone / Expired."""
        self.call(self.store.compact)

    @property
    def resource_version(self) -> int:
        return int(self.call(lambda: self.store.rv))

    def stop(self) -> None:
        if self._stopped or self._loop is None or self._thread is None:
            self._stopped = True
            return
        self._stopped = True
        loop = self._loop

        async def shutdown() -> None:
            self.api.close_watches()
            if self._runner is not None:
                await self._runner.cleanup()

        if loop.is_running():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=10)
            loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout=10)

    def __enter__(self) -> KubeApiEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def write_kubeconfig(
        self,
        path: str | pathlib.Path,
        context: str = "simcluster",
        token: str = ADMIN_TOKEN,
        namespace: str = "default",
    ) -> pathlib.Path:
        """Write a kubeconfig pointing at this emulator: the cluster-admin token unless ``token``
        (e.g. a ServiceAccount's from :meth:`service_account_token`) is given.

        The admin kubeconfig names the plain-HTTP port (what every existing user expects); a
        ServiceAccount's names the HTTPS port with the CA, so kubectl sends its token too. Both carry
        the other port in the cluster's ``simcluster.io/secure-server`` extension."""
        secure = {"server": self.secure_url, "certificate-authority-data": self.tls.ca_data}
        if token == ADMIN_TOKEN:
            return write_token_kubeconfig(
                path, self.url, token, context=context, namespace=namespace, secure=secure
            )
        return write_token_kubeconfig(
            path,
            self.secure_url,
            token,
            context=context,
            namespace=namespace,
            ca_data=self.tls.ca_data,
            secure=secure,
        )

    def service_account_token(self, namespace: str, name: str, expiration_seconds: int = 3600) -> str:
        """A TokenRequest for an existing ServiceAccount, made in-process (no RBAC check): the token
        authenticates as ``system:serviceaccount:NAMESPACE:NAME``. 404 ``ApiError`` if it is missing."""

        def request() -> str:
            body = {"spec": {"expirationSeconds": expiration_seconds}}
            return str(self.api.tokens.token_request(namespace, name, body)["status"]["token"])

        return str(self.call(request))


def write_token_kubeconfig(
    path: str | pathlib.Path,
    server: str,
    token: str,
    *,
    context: str = "simcluster",
    namespace: str = "default",
    ca_data: str = "",
    secure: dict[str, str] | None = None,
) -> pathlib.Path:
    """A kubeconfig with one cluster and one bearer-token user. With ``ca_data`` the server's
    certificate is verified against it, else TLS verification is off; ``secure`` (the HTTPS
    ``server`` and its ``certificate-authority-data``) is recorded as a cluster extension."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    cluster: dict[str, Any] = {"server": server}
    if ca_data:
        cluster["certificate-authority-data"] = ca_data
    else:
        cluster["insecure-skip-tls-verify"] = True
    if secure:
        cluster["extensions"] = [{"name": SECURE_SERVER_EXTENSION, "extension": dict(secure)}]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": f"{context}-user", "user": {"token": token}}],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": f"{context}-user", "namespace": namespace},
            }
        ],
        "current-context": context,
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


__all__ = ["ApiServer", "KubeApiEmulator", "serve", "write_token_kubeconfig"]

"""OpenAPI v2 / v3 documents for the emulator, and the schema checks a real API server applies.

Schemas come from two real sources: the AscendJob CRD (``simcluster/data/ascendjob-crd.yaml``, a copy of the
MindCluster CRD) and the official Python client's models (``kubernetes.client``, generated from the
Kubernetes OpenAPI) for the core types. ``kubectl`` uses ``/openapi/v3`` to learn that the server
does field validation (so ``kubectl apply`` validates without ``--validate=false``) and for
``kubectl explain``; the checks here are what makes that validation real: unknown fields (Strict →
400, Warn → ``Warning`` header), and for the CRD wrong types / missing required fields (422).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import yaml

from simcluster.kubeapi.resources import ALL, ASCENDJOBS, ResourceType

CRD_PATH = Path(__file__).parent.parent / "data" / "ascendjob-crd.yaml"
_META = "io.k8s.apimachinery.pkg.apis.meta.v1"
_META_TYPES = {"V1ObjectMeta", "V1OwnerReference", "V1ManagedFieldsEntry", "V1ListMeta", "V1Status"}
_MODEL_ROOTS = {
    "Pod": "V1Pod",
    "Event": "CoreV1Event",
    "ConfigMap": "V1ConfigMap",
    "Namespace": "V1Namespace",
    "MutatingWebhookConfiguration": "V1MutatingWebhookConfiguration",
    "ServiceAccount": "V1ServiceAccount",
    "TokenRequest": "AuthenticationV1TokenRequest",
    "Role": "V1Role",
    "ClusterRole": "V1ClusterRole",
    "RoleBinding": "V1RoleBinding",
    "ClusterRoleBinding": "V1ClusterRoleBinding",
    "SelfSubjectAccessReview": "V1SelfSubjectAccessReview",
    "SelfSubjectRulesReview": "V1SelfSubjectRulesReview",
    "SelfSubjectReview": "V1SelfSubjectReview",
    "Secret": "V1Secret",
    "Service": "V1Service",
    "Endpoints": "V1Endpoints",
    "Deployment": "V1Deployment",
    "StatefulSet": "V1StatefulSet",
    "Job": "V1Job",
    "PodDisruptionBudget": "V1PodDisruptionBudget",
    "NetworkPolicy": "V1NetworkPolicy",
    "Ingress": "V1Ingress",
    "ValidatingWebhookConfiguration": "V1ValidatingWebhookConfiguration",
}
# API group of each served core-type kind ("" = the core group).
_MODEL_GROUPS = {
    "MutatingWebhookConfiguration": "admissionregistration.k8s.io",
    "TokenRequest": "authentication.k8s.io",
    "Role": "rbac.authorization.k8s.io",
    "ClusterRole": "rbac.authorization.k8s.io",
    "RoleBinding": "rbac.authorization.k8s.io",
    "ClusterRoleBinding": "rbac.authorization.k8s.io",
    "SelfSubjectAccessReview": "authorization.k8s.io",
    "SelfSubjectRulesReview": "authorization.k8s.io",
    "SelfSubjectReview": "authentication.k8s.io",
    "Deployment": "apps",
    "StatefulSet": "apps",
    "Job": "batch",
    "PodDisruptionBudget": "policy",
    "NetworkPolicy": "networking.k8s.io",
    "Ingress": "networking.k8s.io",
    "ValidatingWebhookConfiguration": "admissionregistration.k8s.io",
}
# The CRD's ``required`` lists are published but not enforced: skeletal AscendJobs (no replicaSpecs)
# must still reach the operator, whose InvalidSpecs path the product models.
REQUIRED_CHECKED = False
_SECTION = {"v2": "#/definitions/", "v3": "#/components/schemas/"}


@functools.cache
def crd() -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with CRD_PATH.open() as fh:
        return yaml.load(fh, Loader=loader)


def crd_version() -> dict[str, Any]:
    return next(v for v in crd()["spec"]["versions"] if v["name"] == ASCENDJOBS.version)


def printer_columns(rt: ResourceType) -> list[dict[str, Any]] | None:
    """The CRD's ``additionalPrinterColumns`` for AscendJobs; None for other types."""
    return list(crd_version().get("additionalPrinterColumns") or []) if rt is ASCENDJOBS else None


def definition_name(model: str) -> str:
    """``V1PodSpec`` → ``io.k8s.api.core.v1.PodSpec`` (the names the real OpenAPI uses)."""
    if model in _META_TYPES:
        return f"{_META}.{model[2:]}"
    if model.startswith("CoreV1"):
        return f"io.k8s.api.core.v1.{model[6:]}"
    return f"io.k8s.api.core.v1.{re.sub(r'^V1', '', model)}"


def _clean(node: Any, section: str) -> Any:
    """Pydantic's JSON schema → Kubernetes OpenAPI style: no nullable anyOf, k8s $ref names."""
    if isinstance(node, list):
        return [_clean(n, section) for n in node]
    if not isinstance(node, dict):
        return node
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        merged = {k: v for k, v in node.items() if k != "anyOf"}
        if len(options) == 1:
            merged.update(options[0])
        node = merged
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("title", "default") or (key == "additionalProperties" and value is False):
            continue
        if key == "$ref":
            out[key] = section + definition_name(value.rsplit("/", 1)[-1])
        elif key == "description" and isinstance(value, str):
            out[key] = value.split("\n\nAttributes:")[0].strip()
        else:
            out[key] = _clean(value, section)
    return out


@functools.cache
def _core_defs(section: str) -> dict[str, dict[str, Any]]:
    import kubernetes.client as kc

    defs: dict[str, dict[str, Any]] = {}
    for kind, model in _MODEL_ROOTS.items():
        schema = getattr(kc, model).model_json_schema(by_alias=True)
        for name, sub in (schema.pop("$defs", {}) or {}).items():
            defs[definition_name(name)] = _clean(sub, section)
        root = _clean(schema, section)
        root["x-kubernetes-group-version-kind"] = [
            {"group": _MODEL_GROUPS.get(kind, ""), "kind": kind, "version": "v1"}
        ]
        defs[definition_name(model)] = root
    # Quantities accept numbers on the wire (resource.Quantity.UnmarshalJSON).
    quantity = {"description": "Quantity is a fixed-point representation of a number.", "type": "string"}
    defs["io.k8s.apimachinery.pkg.api.resource.Quantity"] = quantity
    req = defs.get("io.k8s.api.core.v1.ResourceRequirements", {}).get("properties", {})
    for key in ("limits", "requests"):
        if key in req:
            req[key]["additionalProperties"] = {
                "$ref": section + "io.k8s.apimachinery.pkg.api.resource.Quantity"
            }
    return defs


def _crd_root(section: str) -> dict[str, Any]:
    schema = json.loads(json.dumps(crd_version()["schema"]["openAPIV3Schema"]))
    schema["properties"]["metadata"] = {
        "$ref": section + f"{_META}.ObjectMeta",
        "description": "Standard object's metadata.",
    }
    schema["x-kubernetes-group-version-kind"] = [
        {"group": ASCENDJOBS.group, "kind": ASCENDJOBS.kind, "version": ASCENDJOBS.version}
    ]
    return schema


def _volcano_root(rt: ResourceType, section: str) -> dict[str, Any]:
    loose = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "description": f"{rt.kind} of Volcano ({rt.group}).",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"$ref": section + f"{_META}.ObjectMeta"},
            "spec": {**loose, "description": f"Specification of the desired behavior of the {rt.kind}."},
            "status": {**loose, "description": f"Current status of the {rt.kind}."},
        },
        "x-kubernetes-group-version-kind": [{"group": rt.group, "kind": rt.kind, "version": rt.version}],
    }


def schema_name(rt: ResourceType) -> str:
    if rt.builtin:
        return definition_name(_MODEL_ROOTS[rt.kind])
    group = ".".join(reversed(rt.group.split(".")))
    return f"{group}.{rt.version}.{rt.kind}"


@functools.cache
def _definitions(section: str, types: tuple[ResourceType, ...]) -> dict[str, Any]:
    defs = dict(_core_defs(section))
    for rt in types:
        if rt is ASCENDJOBS:
            defs[schema_name(rt)] = _crd_root(section)
        elif not rt.builtin:
            defs[schema_name(rt)] = _volcano_root(rt, section)
    return defs


def _param(name: str, description: str, v3: bool) -> dict[str, Any]:
    p: dict[str, Any] = {"name": name, "in": "query", "description": description, "uniqueItems": True}
    if v3:
        p["schema"] = {"type": "string"}
    else:
        p["type"] = "string"
    return p


_FIELD_VALIDATION = (
    "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) "
    "containing unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict"
)


def _paths(rt: ResourceType, section: str, v3: bool) -> dict[str, Any]:
    base = f"/api/{rt.version}" if not rt.group else f"/apis/{rt.group}/{rt.version}"
    coll = f"{base}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{base}/{rt.plural}"
    gvk = {"group": rt.group, "kind": rt.kind, "version": rt.version}
    ref = {"$ref": section + schema_name(rt)}

    def op(verb: str, action: str, write: bool) -> dict[str, Any]:
        params = (
            [_param("dryRun", "dry run", v3), _param("fieldManager", "field manager", v3)] if write else []
        )
        if write:
            params.append(_param("fieldValidation", _FIELD_VALIDATION, v3))
        ok: dict[str, Any] = {"description": "OK"}
        if v3:
            ok["content"] = {"application/json": {"schema": ref}}
        else:
            ok["schema"] = ref
        body = {"operationId": f"{verb}{rt.kind}", "parameters": params, "responses": {"200": ok}}
        body["x-kubernetes-action"] = action
        body["x-kubernetes-group-version-kind"] = gvk
        return body

    if not rt.stored:  # reviews: create only
        return {coll: {"post": op("create", "post", True)}}
    paths: dict[str, Any] = {}
    for sub in rt.subresources:
        sub_ref = {"$ref": section + definition_name(_MODEL_ROOTS[sub.kind])}
        answer: dict[str, Any] = {"description": "OK"}
        if v3:
            answer["content"] = {"application/json": {"schema": sub_ref}}
        else:
            answer["schema"] = sub_ref
        paths[f"{coll}/{{name}}/{sub.name}"] = {
            "post": {
                "operationId": f"create{rt.kind}{sub.kind}",
                "parameters": [_param("dryRun", "dry run", v3), _param("fieldManager", "field manager", v3)],
                "responses": {"200": answer},
                "x-kubernetes-action": "post",
                "x-kubernetes-group-version-kind": {
                    "group": sub.group,
                    "kind": sub.kind,
                    "version": sub.version,
                },
            }
        }
    return {
        **paths,
        coll: {"get": op("list", "list", False), "post": op("create", "post", True)},
        f"{coll}/{{name}}": {
            "get": op("read", "get", False),
            "put": op("replace", "put", True),
            "patch": op("patch", "patch", True),
            "delete": op("delete", "delete", False),
        },
    }


def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


@functools.cache
def v3_document(group: str, version: str) -> bytes | None:
    types = tuple(rt for rt in ALL if (rt.group, rt.version) == (group, version))
    if not types:
        return None
    return _document(types, v3=True)


def _document(types: tuple[ResourceType, ...], *, v3: bool) -> bytes:
    """The OpenAPI document of ``types``: v3 (schemas under ``components``) or Swagger 2.0."""
    section = _SECTION["v3" if v3 else "v2"]
    paths: dict[str, Any] = {}
    for rt in types:
        paths.update(_paths(rt, section, v3=v3))
    schemas = _definitions(section, types)
    doc: dict[str, Any] = {"openapi": "3.0.0"} if v3 else {"swagger": "2.0"}
    doc["info"] = {"title": "Kubernetes", "version": "v1.31.0-simcluster"}
    doc["paths"] = paths
    if v3:
        doc["components"] = {"schemas": schemas}
    else:
        doc["definitions"] = schemas
    return json.dumps(doc, separators=(",", ":")).encode()


@functools.cache
def v2_protobuf() -> bytes:
    from simcluster.kubeapi import openapi_pb

    return openapi_pb.from_json(v2_document())


def _hash(raw: bytes) -> str:
    return hashlib.sha512(raw).hexdigest()[:64].upper()


@functools.cache
def v3_index() -> bytes:
    entries = {}
    for group, version in sorted({(rt.group, rt.version) for rt in ALL}):
        raw = v3_document(group, version)
        assert raw is not None
        path = _gv_path(group, version)
        entries[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={_hash(raw)}"}
    return json.dumps({"paths": entries}, separators=(",", ":")).encode()


@functools.cache
def v2_document() -> bytes:
    return _document(ALL, v3=False)


# --- the checks -------------------------------------------------------------------------------------
class SchemaProblems:
    def __init__(self) -> None:
        self.unknown: list[str] = []
        self.invalid: list[dict[str, str]] = []


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        extra = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**defs[schema["$ref"].rsplit("/", 1)[-1]], **extra}
    if "allOf" in schema and len(schema["allOf"]) == 1:
        schema = {**_resolve(schema["allOf"][0], defs), **{k: v for k, v in schema.items() if k != "allOf"}}
    return schema


_JSON_TYPES = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def _type_ok(value: Any, schema: dict[str, Any]) -> bool:
    expected = schema.get("type")
    if expected is None or schema.get("x-kubernetes-int-or-string"):
        return True
    if isinstance(value, bool) and expected != "boolean":
        return False
    return isinstance(value, _JSON_TYPES.get(expected, (object,)))


def _walk(
    value: Any, schema: dict[str, Any], defs: dict[str, Any], path: str, out: SchemaProblems, typed: bool
) -> None:
    schema = _resolve(schema, defs)
    if value is None:
        return
    if typed and not _type_ok(value, schema):
        shown = json.dumps(value) if not isinstance(value, dict | list) else type(value).__name__
        out.invalid.append(
            {
                "reason": "FieldValueTypeInvalid",
                "field": path,
                "message": f'Invalid value: "{_json_kind(value)}": {path} in body must be of type '
                f"{schema['type']}: {shown}",
            }
        )
        return
    if isinstance(value, dict):
        if typed and REQUIRED_CHECKED:
            for name in schema.get("required") or []:
                if name not in value:
                    out.invalid.append(
                        {
                            "reason": "FieldValueRequired",
                            "field": f"{path}.{name}",
                            "message": "Required value",
                        }
                    )
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            child = f"{path}.{key}" if path else key
            if props is not None and key in props:
                _walk(sub, props[key], defs, child, out, typed)
            elif isinstance(extra, dict):
                _walk(sub, extra, defs, child, out, typed)
            elif props is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
                out.unknown.append(child)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _walk(item, schema["items"], defs, f"{path}[{index}]", out, typed)


def _json_kind(value: Any) -> str:
    return {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
    }.get(type(value), "null")


def check(rt: ResourceType, obj: dict[str, Any]) -> SchemaProblems:
    """Unknown fields (and, for the CRD, type / required errors) of ``obj``; status is not checked."""
    out = SchemaProblems()
    defs = _definitions(_SECTION["v3"], (rt,))
    root = defs.get(schema_name(rt))
    if root is None:
        return out
    body = {k: v for k, v in obj.items() if k != "status"}
    _walk(body, root, defs, "", out, typed=not rt.builtin)
    return out


def prune(obj: dict[str, Any], paths: list[str]) -> None:
    """Drop unknown fields like the apiserver's decoder / CRD pruning does."""
    for path in paths:
        parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
        node: Any = obj
        for part in parts[:-1]:
            node = node[int(part[1:-1])] if part.startswith("[") else node.get(part)
            if node is None:
                break
        else:
            if isinstance(node, dict):
                node.pop(parts[-1], None)

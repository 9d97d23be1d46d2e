"""``/openapi/v2`` as protobuf, the only form client-go asks for (``OpenAPISchema``).

kubectl up to 1.27 reads the v2 document for client-side validation, ``explain`` and server-side
apply, and asks only for ``application/com.github.proto-openapi.spec.v2@v1.0+protobuf``. This is a
small hand-written encoder for the subset of gnostic's ``openapi.v2.Document`` message that the
emulator's document uses; the field numbers are those of that published schema.
"""

from __future__ import annotations

import json
from typing import Any

import yaml


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _len(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _str(field: int, value: str) -> bytes:
    return _len(field, value.encode()) if value else b""


def _bool(field: int, value: bool) -> bytes:
    return _varint(field << 3) + b"\x01" if value else b""


def _any_yaml(value: Any) -> bytes:
    """openapi.v2.Any{yaml=2}."""
    return _str(2, yaml.safe_dump(value, default_flow_style=True).strip())


def _named_any(field: int, name: str, value: Any) -> bytes:
    return _len(field, _str(1, name) + _len(2, _any_yaml(value)))


def _extensions(field: int, node: dict[str, Any]) -> bytes:
    return b"".join(_named_any(field, key, value) for key, value in node.items() if key.startswith("x-"))


def schema(node: dict[str, Any]) -> bytes:
    """openapi.v2.Schema."""
    out = (
        _str(1, node.get("$ref", "")) + _str(2, node.get("format", "")) + _str(4, node.get("description", ""))
    )
    out += b"".join(_str(19, name) for name in node.get("required") or [])
    out += b"".join(_len(20, _any_yaml(v)) for v in node.get("enum") or [])
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        out += _len(21, _len(1, schema(extra)))
    elif isinstance(extra, bool):
        out += _len(21, _bool(2, extra) or b"\x10\x00")
    if node.get("type"):
        types = node["type"] if isinstance(node["type"], list) else [node["type"]]
        out += _len(22, b"".join(_str(1, t) for t in types))
    if isinstance(node.get("items"), dict):
        out += _len(23, _len(1, schema(node["items"])))
    out += b"".join(_len(24, schema(s)) for s in node.get("allOf") or [])
    props = node.get("properties")
    if isinstance(props, dict):
        out += _len(25, b"".join(_len(1, _str(1, k) + _len(2, schema(v))) for k, v in props.items()))
    return out + _extensions(31, node)


def _parameter(param: dict[str, Any]) -> bytes:
    """ParametersItem{parameter=1: Parameter{non_body_parameter=2: {query_parameter_sub_schema=3}}}."""
    query = (
        _str(2, param.get("in", "query"))
        + _str(3, param.get("description", ""))
        + _str(4, param["name"])
        + _str(6, param.get("type", "string"))
        + _bool(20, bool(param.get("uniqueItems")))
    )
    return _len(1, _len(2, _len(3, query)))


def _operation(op: dict[str, Any]) -> bytes:
    out = _str(5, op.get("operationId", ""))
    out += b"".join(_len(8, _parameter(p)) for p in op.get("parameters") or [])
    responses = b""
    for code, response in (op.get("responses") or {}).items():
        body = _str(1, response.get("description", ""))
        if isinstance(response.get("schema"), dict):
            body += _len(2, _len(1, schema(response["schema"])))
        responses += _len(1, _str(1, code) + _len(2, _len(1, body)))
    out += _len(9, responses)
    return out + _extensions(13, op)


_VERB_FIELDS = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}


def document(doc: dict[str, Any]) -> bytes:
    """openapi.v2.Document from the JSON document (swagger=1, info=2, paths=8, definitions=9)."""
    out = _str(1, doc.get("swagger", "2.0"))
    info = doc.get("info") or {}
    out += _len(2, _str(1, info.get("title", "")) + _str(2, info.get("version", "")))
    paths = b""
    for path, item in (doc.get("paths") or {}).items():
        ops = b"".join(
            _len(_VERB_FIELDS[verb], _operation(op)) for verb, op in item.items() if verb in _VERB_FIELDS
        )
        paths += _len(2, _str(1, path) + _len(2, ops))
    out += _len(8, paths)
    defs = b"".join(
        _len(1, _str(1, name) + _len(2, schema(s))) for name, s in (doc.get("definitions") or {}).items()
    )
    return out + _len(9, defs)


def from_json(raw: bytes) -> bytes:
    return document(json.loads(raw))

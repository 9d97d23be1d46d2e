"""Kubernetes protobuf request bodies (``application/vnd.kubernetes.protobuf``), decoded to the JSON form.

client-go's generated clients send built-in types as protobuf (kubectl 1.33 ``create namespace``,
``create secret``, ``create token``, ``auth can-i`` ...). The body is the envelope of
k8s.io/apimachinery ``runtime/serializer/protobuf``: the 4-byte magic ``k8s\\x00`` then a
``runtime.Unknown`` {typeMeta{apiVersion, kind}, raw, contentEncoding, contentType} whose ``raw`` is
the type's own message from k8s.io/api ``generated.proto``.

The messages are described by ``simcluster/data/k8s-protobuf-schema.json`` (field numbers, JSON
names, pointer/omitempty facts read from the Go struct tags by ``protobuf_schema_gen.py``); this
module builds protobuf descriptors from that table, lets the protobuf runtime parse the wire, and
then writes the dict Go's ``encoding/json`` would have written for the same Go value, so everything
after the body read (admission, validation, storage) sees exactly what a JSON client sends:

- fields the wire carries are kept unless ``omitempty`` drops their zero value (a Go pointer's zero,
  e.g. ``replicas: 0`` or ``allowPrivilegeEscalation: false``, is kept: it was set);
- a non-pointer struct is always written (``"spec": {}``), a nil list without omitempty is ``null``;
- ``Time`` is RFC 3339 seconds (``null`` when zero), ``MicroTime`` has microseconds, ``Duration`` is
  Go's duration string, ``IntOrString`` an int or a string, ``Quantity`` its string, ``[]byte``
  base64 (Secret ``data``), ``RawExtension`` / ``FieldsV1`` the embedded JSON.

Fields the table does not know are dropped, as the real protobuf decoder skips unknown fields (strict
field validation applies only to JSON and YAML). A kind the table does not know, or any custom
resource, is answered 415 like the real server: custom resources are served as JSON and YAML only.
"""

from __future__ import annotations

import base64
import datetime
import functools
import json
import re
from pathlib import Path
from typing import Any

from aiohttp import web
from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

from . import errors
from .errors import ApiError
from .resources import ResourceType

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
SCHEMA_PATH = Path(__file__).parent.parent / "data" / "k8s-protobuf-schema.json"
# What the real server lists in its 415 (apiserver negotiation/errors.go:89): built-in types also
# take protobuf, custom resources (apiextensions-apiserver) only JSON and YAML.
BUILTIN_MEDIA_TYPES = ("application/json", "application/yaml", MEDIA_TYPE)
CUSTOM_MEDIA_TYPES = ("application/json", "application/yaml")
_PACKAGE = "simk8s"

_Field = tuple[int, str, str, str]  # number, JSON name, type, flags (see the schema file's "flags")

# The apimachinery types with their own marshallers, as their generated.proto declares them.
_SPECIAL: dict[str, list[tuple[int, str, str]]] = {
    "@Time": [(1, "seconds", "int64"), (2, "nanos", "int32")],  # meta/v1 generated.proto:1216-1226
    "@MicroTime": [(1, "seconds", "int64"), (2, "nanos", "int32")],  # meta/v1 generated.proto:753-763
    "@Duration": [(1, "duration", "int64")],  # meta/v1 generated.proto:348-349
    "@FieldsV1": [(1, "Raw", "bytes")],  # meta/v1 generated.proto:385-389
    "@IntOrString": [(1, "type", "int64"), (2, "intVal", "int32"), (3, "strVal", "string")],  # intstr :37-42
    "@Quantity": [(1, "string", "string")],  # api/resource generated.proto:97-98
    "@RawExtension": [(1, "raw", "bytes")],  # runtime generated.proto:77-81
    "@TypeMeta": [(1, "apiVersion", "string"), (2, "kind", "string")],  # runtime generated.proto:100-105
    # runtime generated.proto:118-132
    "@Unknown": [(1, "typeMeta", "@TypeMeta"), (2, "raw", "bytes"), (3, "contentEncoding", "string"),
                 (4, "contentType", "string")],
}  # fmt: skip
_SCALARS = {
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    "uint32": descriptor_pb2.FieldDescriptorProto.TYPE_UINT32,
    "uint64": descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
    "double": descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
    "float": descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT,
}


class ProtobufError(ValueError):
    """A body that is not a well-formed Kubernetes protobuf envelope of a known type."""


@functools.cache
def schema() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    return doc


def _fields(key: str) -> list[_Field]:
    if key in _SPECIAL:
        return [(n, name, t, "") for n, name, t in _SPECIAL[key]]
    return [(int(f[0]), str(f[1]), str(f[2]), str(f[3])) for f in schema()["messages"][key]]


def _proto_name(key: str) -> str:
    return re.sub(r"\W", "_", key.lstrip("@")) + ("_" if key.startswith("@") else "")


def _add_field(
    owner: descriptor_pb2.DescriptorProto, number: int, ftype: str, *, repeated: bool, is_map: bool
) -> None:
    field = owner.field.add(name=f"f{number}", number=number)
    field.label = field.LABEL_REPEATED if repeated or is_map else field.LABEL_OPTIONAL
    if is_map:  # map<string, V>: a repeated entry message {key = 1; value = 2}
        entry = owner.nested_type.add(name=f"F{number}Entry")
        entry.options.map_entry = True
        _add_field(entry, 1, "string", repeated=False, is_map=False)
        _add_field(entry, 2, ftype, repeated=False, is_map=False)
        entry.field[0].name, entry.field[1].name = "key", "value"
        field.type = field.TYPE_MESSAGE
        field.type_name = f".{_PACKAGE}.{owner.name}.F{number}Entry"
    elif ftype in _SCALARS:
        field.type = _SCALARS[ftype]
    else:
        field.type = field.TYPE_MESSAGE
        field.type_name = f".{_PACKAGE}.{_proto_name(ftype)}"


@functools.cache
def _classes() -> dict[str, type[message.Message]]:
    """One protobuf message class per schema message, built from the table at first use."""
    file = descriptor_pb2.FileDescriptorProto(name="simk8s.proto", package=_PACKAGE, syntax="proto2")
    keys = [*_SPECIAL, *schema()["messages"]]
    for key in keys:
        msg = file.message_type.add(name=_proto_name(key))
        for number, _name, ftype, flags in _fields(key):
            _add_field(msg, number, ftype, repeated="r" in flags, is_map="m" in flags)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        key: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{_proto_name(key)}"))
        for key in keys
    }


# --- wire → JSON ----------------------------------------------------------------------------------


def _rfc3339(seconds: int, micros: int | None = None) -> str:
    try:
        moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    except (OverflowError, OSError, ValueError):
        raise ProtobufError(f"timestamp {seconds} is out of range") from None
    if micros is None:
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{micros:06d}Z"


def go_duration(nanos: int) -> str:
    """Go's ``time.Duration.String()`` (``1h0m0s``, ``1.5s``, ``300ms``), the JSON form of ``Duration``."""
    if nanos == 0:
        return "0s"
    sign, n = ("-", -nanos) if nanos < 0 else ("", nanos)
    if n < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if n >= size or unit == "ns":
                return sign + _fraction(n, size) + unit
    hours, rest = divmod(n, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = _fraction(rest, 1_000_000_000) + "s"
    if hours or minutes:
        text = f"{minutes}m" + text
    if hours:
        text = f"{hours}h" + text
    return sign + text


def _fraction(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    digits = f"{frac:0{len(str(unit)) - 1}d}".rstrip("0") if unit > 1 else ""
    return f"{whole}.{digits}" if digits else str(whole)


def _embedded_json(raw: bytes, what: str) -> Any:
    if not raw:
        return None
    if raw.startswith(MAGIC):
        return decode(raw)
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtobufError(f"{what} does not hold JSON: {exc}") from None


def _special(key: str, msg: Any) -> Any:
    present = {fd.number for fd, _ in msg.ListFields()}
    if key == "@Time":  # an empty Time is Go's zero time, written as null (time_proto.go Unmarshal)
        return _rfc3339(msg.f1) if present else None
    if key == "@MicroTime":
        return _rfc3339(msg.f1, msg.f2 // 1000) if present else None
    if key == "@Duration":
        return go_duration(msg.f1)
    if key == "@IntOrString":  # type 0 = Int, 1 = String (intstr.go)
        return msg.f3 if msg.f1 == 1 else msg.f2
    if key == "@Quantity":
        return msg.f1 or "0"
    if key in ("@RawExtension", "@FieldsV1"):
        return _embedded_json(msg.f1, key[1:])
    raise ProtobufError(f"no JSON form for {key}")


def _is_zero(value: Any) -> bool:
    return value in ("", 0, False, b"")


def _value(ftype: str, value: Any) -> Any:
    if ftype == "bytes":
        return base64.b64encode(value).decode()
    if ftype.startswith("@List["):
        return [_value(ftype[6:-1], item) for item in value.f1]
    if ftype.startswith("@"):
        return _special(ftype, value)
    if ftype in _SCALARS:
        return value
    return to_json(ftype, value)


def _absent(ftype: str, flags: str) -> tuple[bool, Any]:
    """What ``encoding/json`` writes for a field the wire left out: (write it?, value)."""
    if "o" in flags and ("p" in flags or "r" in flags or "m" in flags or ftype in _SCALARS):
        return False, None
    if "p" in flags or "r" in flags or "m" in flags:
        return True, None  # nil pointer / nil slice / nil map without omitempty
    if ftype in _SCALARS:
        return True, "" if ftype in ("string", "bytes") else (False if ftype == "bool" else 0)
    if ftype in ("@Time", "@MicroTime", "@RawExtension", "@FieldsV1"):
        return True, None
    if ftype.startswith("@"):
        return True, {"@Duration": "0s", "@IntOrString": 0, "@Quantity": "0"}.get(ftype)
    return True, {}  # a non-pointer struct is always written, even when empty


def to_json(key: str, msg: Any) -> dict[str, Any]:
    """The JSON object Go writes for message ``key`` parsed into ``msg``."""
    present = {fd.number: value for fd, value in msg.ListFields()}
    out: dict[str, Any] = {}
    for number, name, ftype, flags in _fields(key):
        if "i" in flags:  # embedded struct (Volume's VolumeSource, Probe's ProbeHandler)
            if number in present:
                out.update(_value(ftype, present[number]))
            continue
        if number not in present:
            write, zero = _absent(ftype, flags)
            if write:
                out[name] = zero
            continue
        value = present[number]
        if "m" in flags:
            out[name] = {k: _value(ftype, v) for k, v in value.items()}
        elif "r" in flags:
            out[name] = [_value(ftype, item) for item in value]
        elif ftype in _SCALARS and "o" in flags and "p" not in flags and _is_zero(value):
            continue
        else:
            out[name] = _value(ftype, value)
    return out


def _parse(key: str, raw: bytes) -> Any:
    try:
        return _classes()[key].FromString(raw)
    except message.DecodeError as exc:
        raise ProtobufError(f"the protobuf body does not parse as {key}: {exc}") from None


def kind_key(api_version: str, kind: str) -> str | None:
    """The schema message of a top-level built-in kind (``v1``/``Namespace`` → ``core/v1.Namespace``)."""
    found = schema()["kinds"].get(f"{api_version}/{kind}")
    return str(found) if found else None


def decode(body: bytes, default_api_version: str = "", default_kind: str = "") -> dict[str, Any]:
    """A protobuf envelope → the JSON object a JSON client would have sent (with apiVersion/kind)."""
    if not body.startswith(MAGIC):
        raise ProtobufError("the protobuf body does not start with the k8s\\x00 prefix")
    unknown = _parse("@Unknown", body[len(MAGIC) :])
    if unknown.f3:
        raise ProtobufError(f"contentEncoding {unknown.f3!r} is not supported")
    if unknown.f4 and unknown.f4 != MEDIA_TYPE:
        raise ProtobufError(f"contentType {unknown.f4!r} inside the protobuf envelope is not supported")
    api_version = unknown.f1.f1 or default_api_version
    kind = unknown.f1.f2 or default_kind
    key = kind_key(api_version, kind)
    if key is None:
        raise UnknownKind(api_version, kind)
    out: dict[str, Any] = {"kind": kind, "apiVersion": api_version}
    out.update(to_json(key, _parse(key, unknown.f2)))
    return out


class UnknownKind(ProtobufError):
    def __init__(self, api_version: str, kind: str) -> None:
        super().__init__(f"no protobuf schema for {api_version}, Kind={kind}")


def unsupported(rt: ResourceType | None) -> ApiError:
    """415 with the real text (apiserver pkg/endpoints/handlers/negotiation/errors.go:88-99)."""
    accepted = BUILTIN_MEDIA_TYPES if rt is None or rt.builtin else CUSTOM_MEDIA_TYPES
    return ApiError(
        415,
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


def is_protobuf(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == MEDIA_TYPE


def body_as_json(
    content_type: str,
    body: bytes,
    rt: ResourceType | None,
    *,
    api_version: str | None = None,
    kind: str | None = None,
) -> bytes:
    """The request body as JSON bytes: a protobuf body is decoded, any other body is returned as sent.

    ``api_version``/``kind`` name the kind an envelope without typeMeta is read as (by default
    ``rt``'s; a subresource such as ``serviceaccounts/token`` takes another kind, TokenRequest).
    """
    if not is_protobuf(content_type):
        return body
    if rt is not None and not rt.builtin:
        raise unsupported(rt)
    if not body:
        return body
    try:
        obj = decode(
            body,
            api_version if api_version is not None else (rt.api_version if rt else ""),
            kind if kind is not None else (rt.kind if rt else ""),
        )
    except UnknownKind:
        raise unsupported(rt) from None
    except ProtobufError as exc:
        raise errors.bad_request(f"the body of the request could not be decoded: {exc}") from None
    return json.dumps(obj, separators=(",", ":")).encode()


async def read_body(request: web.Request, rt: ResourceType | None) -> bytes:
    """``await request.read()`` for handlers of built-in types: protobuf bodies arrive as JSON bytes."""
    return body_as_json(request.content_type, await request.read(), rt)

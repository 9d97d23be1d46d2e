"""The JSON shape of the parts of an ``AdmissionReview`` request that admission reads.

The apiserver always sends these with these types; a body that does not (a string ``kind``, a list
``metadata``, annotations with numbers) did not come from it and is refused with a 400 naming the
field, where it used to reach ``admit`` and fail there with an AttributeError (a 500).
"""

from __future__ import annotations

from typing import Any

from apps.core.parsers import json_safety_problem

_REQUEST_FIELDS: dict[str, type] = {
    "kind": dict,
    "operation": str,
    "namespace": str,
    "dryRun": bool,
    "object": dict,
}
_METADATA_FIELDS: dict[str, type] = {
    "name": str,
    "namespace": str,
    "uid": str,
    "annotations": dict,
    "labels": dict,
}
_JSON_TYPE_NAMES: dict[type, str] = {dict: "an object", str: "a string", bool: "true or false"}
_STRING_MAPS = ("annotations", "labels")


def review_shape_problem(body: dict[str, Any], request: dict[str, Any]) -> str | None:
    """Why the review cannot be read (field, wanted type, what came), or None when it can."""
    for key, expected in _REQUEST_FIELDS.items():
        problem = _wrong_type(f"request.{key}", request.get(key), expected)
        if problem:
            return problem
    metadata = (request.get("object") or {}).get("metadata")
    problem = _wrong_type("request.object.metadata", metadata, dict)
    if problem:
        return problem
    for key, expected in _METADATA_FIELDS.items():
        value = (metadata or {}).get(key)
        problem = _wrong_type(f"request.object.metadata.{key}", value, expected)
        if problem:
            return problem
        if key in _STRING_MAPS and value and not all(isinstance(v, str) for v in value.values()):
            return f"request.object.metadata.{key} must map names to strings"
    # Depth (64 levels), NaN/Infinity and lone surrogates: what the API's JSON parser refuses too.
    return json_safety_problem(body, allow_nul=True)


def _wrong_type(where: str, value: Any, expected: type) -> str | None:
    if value is None or isinstance(value, expected):
        return None
    return f"{where} must be {_JSON_TYPE_NAMES[expected]}, got {type(value).__name__}"

"""Validate manifests against the real AscendJob CRD's openAPIV3Schema with ``jsonschema``.

The CRD is written in Kubernetes' structural-schema dialect; this maps its extensions the way the
API server applies them:

- ``x-kubernetes-int-or-string``: an integer or a string (resource quantities, probe ports).
- ``x-kubernetes-preserve-unknown-fields``: any extra field is kept.
- Every other object that lists ``properties`` is closed (``additionalProperties: false``): the API
  server would silently *prune* an unknown field, so for a renderer it is as bad as a rejection.
- ``x-kubernetes-list-type: map`` + ``x-kubernetes-list-map-keys``: no two items share the keys
  (``protocol`` defaults to TCP, as the API server defaults it); ``set``: unique items.
- ``format: int32`` / ``int64``: range-checked.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CRD_RELATIVE_PATH = Path("reference") / "ascendjob-crd.yaml"
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_MAP_KEY_DEFAULTS = {"protocol": "TCP"}


def _structural(node: Any) -> Any:
    """A copy of a CRD schema node rewritten into plain JSON Schema (draft 7) plus our keywords."""
    if isinstance(node, list):
        return [_structural(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _structural(value) for key, value in node.items() if key != "description"}
    if out.pop("x-kubernetes-int-or-string", False):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    preserve = out.pop("x-kubernetes-preserve-unknown-fields", False)
    if "properties" in out and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    list_type = out.pop("x-kubernetes-list-type", None)
    map_keys = out.pop("x-kubernetes-list-map-keys", None)
    if list_type == "map" and map_keys:
        out["x-unique-map-keys"] = list(map_keys)
    elif list_type == "set":
        out["uniqueItems"] = True
    return out


def _unique_map_keys(validator: Any, keys: list[str], instance: Any, schema: dict[str, Any]) -> Any:
    if not validator.is_type(instance, "array"):
        return
    seen: dict[tuple[Any, ...], int] = {}
    for index, item in enumerate(instance):
        if not isinstance(item, dict):
            continue
        identity = tuple(item.get(key, _MAP_KEY_DEFAULTS.get(key)) for key in keys)
        if identity in seen:
            yield jsonschema.ValidationError(
                f"items {seen[identity]} and {index} share the list-map keys "
                f"{dict(zip(keys, identity, strict=True))}"
            )
        else:
            seen[identity] = index


_format_checker = jsonschema.FormatChecker()


for _name, (_low, _high) in _INT_RANGES.items():

    def _in_range(value: Any, low: int = _low, high: int = _high) -> bool:
        return not isinstance(value, int) or isinstance(value, bool) or low <= value <= high

    _format_checker.checks(_name)(_in_range)

_Validator = jsonschema.validators.extend(jsonschema.Draft7Validator, {"x-unique-map-keys": _unique_map_keys})


@cache
def crd_validator(shared_dir: Path) -> Any:
    """A validator for AscendJob documents built from ``<shared>/reference/ascendjob-crd.yaml``."""
    crd = yaml.safe_load((shared_dir / CRD_RELATIVE_PATH).read_text(encoding="utf-8"))
    version = next(v for v in crd["spec"]["versions"] if v.get("storage", True))
    schema = _structural(version["schema"]["openAPIV3Schema"])
    return _Validator(schema, format_checker=_format_checker)


def crd_errors(manifest: dict[str, Any], shared_dir: Path) -> list[str]:
    """Every schema violation as ``path: message`` (empty when the manifest is valid)."""
    errors = sorted(crd_validator(shared_dir).iter_errors(manifest), key=lambda e: list(e.absolute_path))
    return ["/".join(str(p) for p in error.absolute_path) + ": " + error.message for error in errors]


def assert_valid_ascendjob(manifest: dict[str, Any], shared_dir: Path) -> None:
    errors = crd_errors(manifest, shared_dir)
    assert not errors, "manifest violates the AscendJob CRD schema:\n" + "\n".join(errors[:20])

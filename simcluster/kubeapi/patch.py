"""Patch algorithms: JSON merge patch (RFC 7386) and JSON patch (RFC 6902).

Strategic merge patch and server-side apply are served with merge-patch semantics (lists are
replaced wholesale); that is a documented simplification - the product only patches maps.
Functions never mutate their inputs. :class:`PatchError` means "patch could not be applied" (422),
:class:`PatchDecodeError` means "patch document is malformed" (400), matching the apiserver.
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    pass


class PatchDecodeError(ValueError):
    pass


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _strict_equal(a: Any, b: Any) -> bool:
    # JSON equality: True != 1 and 1 == 1.0, which Python's == gets wrong for bools.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_strict_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise PatchDecodeError(f"path must be a string, got {type(path).__name__}")
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}: must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Any], token: str, path: str, *, allow_end: bool) -> int:
    if allow_end and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"invalid array index {token!r} in {path!r}")
    idx = int(token)
    limit = len(container) if allow_end else len(container) - 1
    if idx > limit:
        raise PatchError(f"array index {idx} out of bounds in {path!r}")
    return idx


def _parent(doc: Any, tokens: list[str], path: str) -> Any:
    cur = doc
    for tok in tokens[:-1]:
        if isinstance(cur, dict):
            if tok not in cur:
                raise PatchError(f"missing path {path!r}: no key {tok!r}")
            cur = cur[tok]
        elif isinstance(cur, list):
            cur = cur[_index(cur, tok, path, allow_end=False)]
        else:
            raise PatchError(f"missing path {path!r}: {tok!r} is not a container")
    return cur


def _locate(doc: Any, path: str) -> tuple[Any, str] | None:
    """The container ``path`` points into and the last token (a key or an index); None: the root."""
    tokens = _pointer(path)
    if not tokens:
        return None
    return _parent(doc, tokens, path), tokens[-1]


def _get(doc: Any, path: str) -> Any:
    found = _locate(doc, path)
    if found is None:
        return doc
    parent, last = found
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"missing path {path!r}")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path, allow_end=False)]
    raise PatchError(f"missing path {path!r}")


def _add(doc: Any, path: str, value: Any) -> Any:
    found = _locate(doc, path)
    if found is None:
        return value
    parent, last = found
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, allow_end=True), value)
    else:
        raise PatchError(f"cannot add at {path!r}: parent is not a container")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    found = _locate(doc, path)
    if found is None:
        raise PatchError("cannot remove the document root")
    parent, last = found
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"unable to remove nonexistent key {last!r} at {path!r}")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, path, allow_end=False))
    raise PatchError(f"cannot remove {path!r}: parent is not a container")


def json_patch(document: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise PatchDecodeError("json patch must be a JSON array of operations")
    doc = copy.deepcopy(document)
    for i, op in enumerate(operations):
        if not isinstance(op, dict):
            raise PatchDecodeError(f"operation {i} is not a JSON object")
        kind = op.get("op")
        if "path" not in op:
            raise PatchDecodeError(f"operation {i} ({kind!r}) is missing 'path'")
        path = op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchDecodeError(f"operation {i} ({kind!r}) is missing 'value'")
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)  # RFC 6902: target must exist
            if _pointer(path):
                doc, _ = _remove(doc, path)
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind in ("move", "copy"):
            src = op.get("from")
            if not isinstance(src, str):
                raise PatchDecodeError(f"operation {i} ({kind!r}) is missing 'from'")
            if kind == "move":
                if path != src and path.startswith(src + "/"):
                    raise PatchError(f"cannot move {src!r} into its own child {path!r}")
                doc, value = _remove(doc, src)
            else:
                value = copy.deepcopy(_get(doc, src))
            doc = _add(doc, path, value)
        elif kind == "test":
            if not _strict_equal(_get(doc, path), op["value"]):
                raise PatchError(f"testing value {path} failed")
        else:
            raise PatchDecodeError(f"operation {i}: unsupported op {kind!r}")
    return doc

"""Field ownership (``metadata.managedFields``) and server-side apply conflicts.

Simplified from structured-merge-diff: a field is a path of map keys down to a leaf; lists are
atomic (owned as a whole, as for lists without ``x-kubernetes-list-map-keys``). Each write records
the fields it set for its manager (``Apply`` for apply patches, ``Update`` otherwise); an apply that
changes a field another manager owns is a 409 Conflict unless ``force=true``, which moves ownership.
Fields a manager applied before and omits now are removed when nobody else owns them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

Path = tuple[str, ...]
_SKIP_META = {
    "managedFields",
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
}


def leaves(obj: Any, prefix: Path = ()) -> dict[Path, Any]:
    """Every leaf path → value (maps are walked, everything else is a leaf)."""
    out: dict[Path, Any] = {}
    if isinstance(obj, dict) and (obj or not prefix):
        for key, value in obj.items():
            if prefix == () and key in ("apiVersion", "kind", "status"):
                continue
            if prefix == ("metadata",) and key in _SKIP_META | {"name", "namespace"}:
                continue
            out.update(leaves(value, (*prefix, key)))
    else:
        out[prefix] = obj
    return out


def _encode(paths: set[Path]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for key in path:
            node = node.setdefault(f"f:{key}", {})
    return tree


def _decode(tree: dict[str, Any], prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for key, sub in (tree or {}).items():
        if not key.startswith("f:"):
            continue
        path = (*prefix, key[2:])
        if sub:
            out |= _decode(sub, path)
        else:
            out.add(path)
    return out


def owned(obj: dict[str, Any]) -> list[tuple[str, str, set[Path], dict[str, Any]]]:
    """(manager, operation, fields, entry) for every managedFields entry."""
    out = []
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        out.append(
            (
                entry.get("manager", ""),
                entry.get("operation", ""),
                _decode(entry.get("fieldsV1") or {}),
                entry,
            )
        )
    return out


def _covers(owner: Path, path: Path) -> bool:
    n = min(len(owner), len(path))
    return owner[:n] == path[:n]


def conflicts(current: dict[str, Any], applied: dict[str, Any], manager: str) -> list[tuple[str, Path]]:
    """Fields the apply would change that another manager owns."""
    now = leaves(current)
    out: list[tuple[str, Path]] = []
    for path, value in leaves(applied).items():
        if now.get(path, _MISSING) == value:
            continue
        for other, _op, fields, _entry in owned(current):
            if other == manager:
                continue
            if any(_covers(f, path) for f in fields):
                out.append((other, path))
    return out


_MISSING = object()


def conflict_message(found: list[tuple[str, Path]], api_version: str) -> str:
    lines = [f'conflict with "{m}" using {api_version}: .{".".join(p)}' for m, p in found]
    count = len(found)
    head = f"Apply failed with {count} conflict{'s' if count != 1 else ''}: "
    return head + ("\n".join(lines) if count > 1 else lines[0])


def record(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    manager: str,
    operation: str,
    api_version: str,
    applied: dict[str, Any] | None = None,
) -> None:
    """Update ``new``'s managedFields for a write by ``manager``.

    For ``Apply`` the manager owns exactly the applied fields and takes them from everyone else
    (the caller has already checked conflicts or forced); for ``Update`` it takes the fields whose
    value changed.
    """
    before = leaves(old) if old else {}
    after = leaves(new)
    if operation == "Apply":
        mine = set(leaves(applied or {}))
    else:
        mine = {p for p, v in after.items() if before.get(p, _MISSING) != v}
    entries: list[dict[str, Any]] = []
    kept: set[Path] = set()
    previous_entry: dict[str, Any] | None = None
    for other, op, fields, entry in owned(old or {}):
        if other == manager and op == operation:
            if operation == "Update":
                mine |= {f for f in fields if f in after}
            previous_entry = entry
            continue
        remaining = {f for f in fields if f in after and not any(_covers(m, f) for m in mine)}
        if remaining:
            entries.append({**entry, "fieldsV1": _encode(remaining)})
            kept |= remaining
    mine = {p for p in mine if p in after}
    if mine and previous_entry is not None and _decode(previous_entry.get("fieldsV1") or {}) == mine:
        entries.append(previous_entry)  # nothing new owned: keep the entry (and its time) as it was
    elif mine:
        entries.append(
            {
                "manager": manager,
                "operation": operation,
                "apiVersion": api_version,
                "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "fieldsType": "FieldsV1",
                "fieldsV1": _encode(mine),
            }
        )
    entries.sort(
        key=lambda e: (e.get("manager", ""), e.get("operation", ""))
    )  # stable: no-op writes stay no-ops
    meta = new.setdefault("metadata", {})
    if entries:
        meta["managedFields"] = entries
    else:
        meta.pop("managedFields", None)


def apply(current: dict[str, Any], applied: dict[str, Any], manager: str) -> dict[str, Any]:
    """The object after applying: applied values merged in, and fields this manager applied before
    but omits now removed unless another manager still owns them."""
    result = json.loads(json.dumps(current))
    previous: set[Path] = set()
    others: set[Path] = set()
    for who, op, fields, _entry in owned(current):
        if who == manager and op == "Apply":
            previous |= fields
        else:
            others |= fields
    now = set(leaves(applied))
    for path in previous - now:
        if path in others:
            continue
        node: Any = result
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)
    for path, value in leaves(applied).items():
        node = result
        for key in path[:-1]:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        node[path[-1]] = json.loads(json.dumps(value))
    return result


def manager_from_user_agent(user_agent: str | None) -> str:
    """The default field manager: the User-Agent up to the first ``/`` (``kubectl``, ...)."""
    return (user_agent or "unknown").split("/", 1)[0][:128] or "unknown"

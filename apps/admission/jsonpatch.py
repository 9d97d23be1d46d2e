"""The RFC 6902 JSON Patch that turns one JSON document into another (what an admission webhook returns).

Objects are diffed key by key; lists and scalars that differ are replaced whole, which keeps the
patch valid whatever the apiserver's list merge rules are. Keys are sorted, so the same two
documents always give the same patch (the webhook's idempotency rests on it).
"""

from __future__ import annotations

from typing import Any


def pointer_token(key: str) -> str:
    """Escape one path segment (RFC 6901): ``~`` → ``~0``, ``/`` → ``~1``."""
    return key.replace("~", "~0").replace("/", "~1")


def diff(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """Operations that turn ``before`` into ``after``; an empty list when they are equal."""
    if isinstance(before, dict) and isinstance(after, dict):
        ops: list[dict[str, Any]] = []
        for key in sorted(before.keys() - after.keys()):
            ops.append({"op": "remove", "path": f"{path}/{pointer_token(key)}"})
        for key in sorted(after.keys()):
            child = f"{path}/{pointer_token(key)}"
            if key not in before:
                ops.append({"op": "add", "path": child, "value": after[key]})
            else:
                ops.extend(diff(before[key], after[key], child))
        return ops
    if before == after and type(before) is type(after):
        return []
    return [{"op": "replace", "path": path, "value": after}]

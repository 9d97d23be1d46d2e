"""JSON merge patch (RFC 7386) helpers: compute the patch that turns one document into another."""

from __future__ import annotations

from typing import Any


def merge_patch_diff(old: Any, new: Any) -> Any:
    """The smallest merge patch taking ``old`` to ``new`` (lists are replaced whole, per RFC 7386).

    Returns ``{}`` when they are equal. Keys missing from ``new`` become ``None`` (delete).
    """
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: dict[str, Any] = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            if isinstance(old[key], dict) and isinstance(value, dict):
                patch[key] = merge_patch_diff(old[key], value)
            else:
                patch[key] = value
    return patch


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 merge patch, returning a new document."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result

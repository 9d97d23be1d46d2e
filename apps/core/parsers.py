"""A JSON parser that turns every malformed body into a 400, and rejects what the database cannot store."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

# Far deeper than any policy or manifest, far shallower than the interpreter's recursion limit.
MAX_DEPTH = 64
# A body of REQUEST_BODY_MAX_BYTES (3 MiB, apps/core/body_limit.py) holds at most ~1.6 M JSON values.
MAX_NODES = 2_000_000
# A UTF-16 surrogate code point on its own ("\ud800" in JSON text, or in YAML) decodes to a str that
# UTF-8 cannot encode: PostgreSQL, the renderer and the response encoder would all fail on it later.
_SURROGATE = re.compile("[\ud800-\udfff]")
LONE_SURROGATE = (
    "strings must not contain lone UTF-16 surrogates (\\ud800-\\udfff not part of a pair); "
    "send valid Unicode text"
)


def json_safety_problem(
    value: Any, *, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES, allow_nul: bool = False
) -> str | None:
    """Why ``value`` cannot be stored or echoed as strict JSON, or None when it can.

    PostgreSQL rejects NUL characters in text and jsonb, strict JSON has no NaN or Infinity, and a
    lone surrogate cannot be encoded as UTF-8; each would otherwise surface as a server error far
    from the request that carried them. (``json`` joins an escaped surrogate *pair* into one
    character, so only unpaired ones remain to be found here.)
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    visited = 0
    while stack:
        item, depth = stack.pop()
        visited += 1
        if visited > max_nodes:  # also stops YAML alias bombs, whose shared nodes are counted each time
            return f"the document has more than {max_nodes} values"
        if depth > max_depth:
            return f"the document is nested more than {max_depth} levels deep"
        if isinstance(item, str):
            if not allow_nul and "\x00" in item:
                return "strings must not contain NUL characters (\\u0000)"
            if _SURROGATE.search(item):
                return LONE_SURROGATE
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "numbers must be finite (no NaN, Infinity or values beyond 1e308)"
        elif isinstance(item, dict):
            for key, child in item.items():
                stack.append((key, depth + 1))
                stack.append((child, depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((child, depth + 1) for child in item)
    return None


class SafeJSONParser(JSONParser):
    """DRF's JSON parser plus: deep nesting, huge integers, NaN/Infinity and lone surrogates are 400s.

    NUL characters are legal JSON and are refused only where a value would be stored (see the
    serializers), so ``/policies/validate/`` can still answer any well-formed body with a result.
    """

    def parse(
        self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the document is nested too deeply.") from None
        problem = json_safety_problem(data, allow_nul=True)
        if problem:
            raise ParseError(f"JSON parse error - {problem}.")
        return data


def parse_json_text(text: str) -> Any:
    """Parse JSON text strictly (no NaN/Infinity); raises ValueError with a readable message."""

    def reject_constant(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    try:
        return json.loads(text, parse_constant=reject_constant)
    except RecursionError:
        raise ValueError("the document is nested too deeply") from None

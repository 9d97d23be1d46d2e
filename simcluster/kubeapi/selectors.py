"""Label and field selectors with the apiserver's grammar and matching rules.

Parse errors raise :class:`SelectorError`; the server turns them into 400 BadRequest. Matching
follows ``k8s.io/apimachinery/pkg/labels``: ``!=`` and ``notin`` also match objects that lack the
key, ``in`` / ``=`` require it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SPECIAL = set(" \t\n\r,()=!<>")


class SelectorError(ValueError):
    pass


def _check_key(key: str) -> None:
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        raise SelectorError(f"invalid label key {key!r}: prefix must be a DNS-1123 subdomain")
    if not name or len(name) > 63 or not _NAME.match(name):
        raise SelectorError(
            f"invalid label key {key!r}: name part must consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character (max 63 characters)"
        )


def _check_value(value: str) -> None:
    if value and (len(value) > 63 or not _NAME.match(value)):
        raise SelectorError(
            f"invalid label value {value!r}: must be 63 characters or less and must be empty or begin and "
            "end with an alphanumeric character with '-', '_' or '.' between"
        )


def _tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\n\r":
            i += 1
        elif c in ",()<>":
            tokens.append(c)
            i += 1
        elif c in "!=":
            # "!=" and "==" before the one-character "!" and "=".
            op = text[i : i + 2] if text.startswith(c + "=", i) else c
            tokens.append(op)
            i += len(op)
        else:
            j = i
            while j < n and text[j] not in _SPECIAL:
                j += 1
            tokens.append(text[i:j])
            i = j
    return tokens


_OPERATORS = {",", "(", ")", "<", ">", "!", "!=", "=", "=="}


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: str  # exists, !exists, =, !=, in, notin, gt, lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, Any]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        if self.op in ("!=", "notin"):
            return not present or labels[self.key] not in self.values
        if not present:
            return False
        try:
            have = int(labels[self.key])
        except (TypeError, ValueError):
            return False
        return have > int(self.values[0]) if self.op == "gt" else have < int(self.values[0])


class LabelSelector:
    """A parsed ``labelSelector`` query; the empty selector matches everything."""

    def __init__(self, requirements: tuple[Requirement, ...] = ()) -> None:
        self.requirements = requirements

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, Any] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        if not text or not text.strip():
            return cls()
        toks = _tokenize(text)
        reqs: list[Requirement] = []
        pos = 0

        def peek() -> str | None:
            return toks[pos] if pos < len(toks) else None

        def ident(what: str) -> str:
            nonlocal pos
            tok = peek()
            if tok is None or tok in _OPERATORS:
                raise SelectorError(f"unable to parse requirement: found {tok!r}, expected: {what}")
            pos += 1
            return tok

        while True:
            negate = False
            if peek() == "!":
                negate = True
                pos += 1
            key = ident("identifier")
            _check_key(key)
            tok = peek()
            if negate:
                if tok not in (None, ","):
                    raise SelectorError(f"unable to parse requirement: found {tok!r}, expected: ','")
                reqs.append(Requirement(key, "!exists"))
            elif tok in (None, ","):
                reqs.append(Requirement(key, "exists"))
            elif tok in ("=", "==", "!="):
                pos += 1
                nxt = peek()
                value = "" if nxt in (None, ",") else ident("identifier")
                _check_value(value)
                reqs.append(Requirement(key, "!=" if tok == "!=" else "=", (value,)))
            elif tok in ("<", ">"):
                pos += 1
                value = ident("integer")
                try:
                    int(value)
                except ValueError:
                    raise SelectorError(
                        f"for 'Gt', 'Lt' operators, the value must be an integer: {value!r}"
                    ) from None
                reqs.append(Requirement(key, "gt" if tok == ">" else "lt", (value,)))
            elif tok in ("in", "notin"):
                pos += 1
                if peek() != "(":
                    raise SelectorError(f"unable to parse requirement: found {peek()!r}, expected: '('")
                pos += 1
                values: list[str] = []
                while True:
                    nxt = peek()
                    if nxt in (",", ")"):
                        values.append("")  # the apiserver allows empty values inside a set
                    else:
                        values.append(ident("identifier"))
                    _check_value(values[-1])
                    nxt = peek()
                    if nxt == ",":
                        pos += 1
                        continue
                    if nxt == ")":
                        pos += 1
                        break
                    raise SelectorError(f"unable to parse requirement: found {nxt!r}, expected: ',' or ')'")
                reqs.append(Requirement(key, tok, tuple(values)))
            else:
                raise SelectorError(
                    f"unable to parse requirement: found {tok!r}, expected: in, notin, =, ==, !=, gt, lt"
                )
            tok = peek()
            if tok is None:
                break
            if tok != ",":
                raise SelectorError(f"found {tok!r}, expected: ',' or 'end of string'")
            pos += 1
        return cls(tuple(reqs))


def _lookup_field(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


class FieldSelector:
    """``fieldSelector``: comma-separated ``path=value`` / ``path==value`` / ``path!=value`` terms."""

    def __init__(self, terms: tuple[tuple[str, bool, str], ...] = ()) -> None:
        self.terms = terms  # (path, equal?, value)

    @property
    def empty(self) -> bool:
        return not self.terms

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all((_lookup_field(obj, path) == value) == equal for path, equal, value in self.terms)

    def names_only(self) -> str | None:
        """The single ``metadata.name=X`` value if that is the whole selector (fast-path lookups)."""
        if len(self.terms) == 1 and self.terms[0][0] == "metadata.name" and self.terms[0][1]:
            return self.terms[0][2]
        return None

    @classmethod
    def parse(cls, text: str | None, supported: frozenset[str]) -> FieldSelector:
        if not text or not text.strip():
            return cls()
        terms: list[tuple[str, bool, str]] = []
        for raw in text.split(","):
            part = raw.strip()
            if not part:
                raise SelectorError(f"invalid selector: {text!r}; empty term")
            for op, is_equal in (("!=", False), ("==", True), ("=", True)):
                if op in part:
                    path, _, value = part.partition(op)
                    equal = is_equal
                    break
            else:
                raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
            path = path.strip()
            if path not in supported:
                raise SelectorError(f"field label not supported: {path}")
            terms.append((path, equal, value.strip()))
        return cls(tuple(terms))

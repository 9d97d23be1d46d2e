"""Merging policy entries (env, ports, volumes, volume mounts) into a user's lists.

The user's entries are never dropped or reordered. An entry the user already has (same env name,
same port name or containerPort, same volume name, same mountPath) is updated in place instead of
duplicated. Entries the renderer *appended* are recorded in an ownership marker on the pod template,
so a later render with another policy can take back exactly those and nothing the user wrote; they
are always re-appended in one canonical order, which makes rendering idempotent and makes
"render with s1, then with s2" equal "render with s2".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Entry = dict[str, Any]
TOKEN_SEPARATOR = ","
TCP = "TCP"


@dataclass(frozen=True)
class EntryKind:
    """How entries of one list are identified, matched to the user's, compared and updated."""

    name: str
    key: Callable[[Entry], Any]  # what the ownership marker records
    matchers: tuple[Callable[[Entry, Entry], bool], ...]  # tried in order against the user's entries
    same: Callable[[Entry, Entry], bool]  # the user's entry already says what the policy wants
    replace: Callable[[Entry, Entry], Entry]  # the user's entry updated in place

    def token(self, entry: Entry) -> str:
        return f"{self.name}:{self.key(entry)}"


def _same_env(have: Entry, want: Entry) -> bool:
    if "value" in want:
        return have.get("value") == want["value"] and "valueFrom" not in have
    # Downward API: the API server may add fieldRef.apiVersion; only the field path matters.
    have_ref = (have.get("valueFrom") or {}).get("fieldRef") or {}
    want_ref = want["valueFrom"]["fieldRef"]
    return (
        "value" not in have
        and isinstance(have_ref, dict)
        and have_ref.get("fieldPath") == want_ref["fieldPath"]
    )


def _is_tcp(entry: Entry) -> bool:
    return bool(entry.get("protocol", TCP) == TCP)


def _replace_port(have: Entry, want: Entry) -> Entry:
    # Keep the user's extras (hostPort, hostIP) but TaskD and MindIO speak TCP.
    kept = {key: value for key, value in have.items() if key != "protocol"}
    return {**kept, **want}


def _identified_by(
    name: str, field: str, same: Callable[[Entry, Entry], bool] = lambda have, want: have == want
) -> EntryKind:
    """Entries that one field identifies (an env var's name, a mount's path); an update replaces them."""
    return EntryKind(
        name=name,
        key=lambda e: e.get(field),
        matchers=(lambda have, want: have.get(field) == want[field],),
        same=same,
        replace=lambda have, want: dict(want),
    )


ENV = _identified_by("env", "name", same=_same_env)
PORT = EntryKind(
    name="port",
    key=lambda e: e.get("name"),
    matchers=(
        lambda have, want: have.get("name") == want["name"],
        lambda have, want: have.get("containerPort") == want["containerPort"] and _is_tcp(have),
    ),
    same=lambda have, want: (
        have.get("name") == want["name"]
        and have.get("containerPort") == want["containerPort"]
        and _is_tcp(have)
    ),
    replace=_replace_port,
)
VOLUME = _identified_by("volume", "name")
MOUNT = _identified_by("mount", "mountPath")


def parse_marker(value: Any) -> frozenset[str]:
    """Ownership tokens from the marker annotation (tolerates a missing or hand-mangled value)."""
    if not isinstance(value, str) or not value:
        return frozenset()
    return frozenset(token for token in value.split(TOKEN_SEPARATOR) if token)


def format_marker(tokens: set[str]) -> str:
    return TOKEN_SEPARATOR.join(sorted(tokens))


def merge_entries(
    existing: Any, desired: list[Entry], kind: EntryKind, owned: frozenset[str]
) -> tuple[list[Any], set[str]]:
    """The user's list with ``desired`` merged in, and the tokens of the entries this call appended.

    Entries recorded in ``owned`` were appended by an earlier render: they are taken out first and
    re-added only if still desired, so a policy that no longer needs them leaves no trace.
    """
    items = existing if isinstance(existing, list) else []
    if owned:
        merged = [e for e in items if not (isinstance(e, dict) and kind.token(e) in owned)]
    else:
        merged = list(items)
    appended: set[str] = set()
    for want in desired:
        index = _find(merged, want, kind)
        if index is None:
            merged.append(want)
            appended.add(kind.token(want))
        elif not kind.same(merged[index], want):
            merged[index] = kind.replace(merged[index], want)
    return merged, appended


def _find(entries: list[Any], want: Entry, kind: EntryKind) -> int | None:
    for matches in kind.matchers:
        for index, entry in enumerate(entries):
            if isinstance(entry, dict) and matches(entry, want):
                return index
    return None

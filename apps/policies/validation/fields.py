"""Readers for single policy fields: type, range and closed-set checks, plus strategy-list parsing.

Each reader reports problems into an ``IssueCollector`` and returns the clean value, or ``None``
when the value is unusable (the caller then keeps the default and marks the field bad so that
cross-field rules do not pile follow-on errors onto it).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from apps.core.numbers import is_ascii_digits
from apps.policies.spec import RELEASES, STRATEGIES

from .issues import IssueCollector, describe, json_type, pointer

# "7.3", "7.3.0", "7.1.RC1", "7.1RC1", "v26.1.0" -> (major, minor); RC/patch suffixes do not change rules.
# The suffix is read one token at a time ("rc" or one digit, each after at most one separator), and
# every quantifier is possessive: no two quantifiers can share a character, so the match is linear.
# (The earlier ``(?:[.\-_]?(?:rc\d*|\d+))*`` could split a run of digits 2^n ways: 1.4 s at 25 chars.)
_RELEASE_RE = re.compile(r"^v?([0-9]++)\.([0-9]++)(?:[.\-_]?+(?:rc|[0-9]))*+$", re.IGNORECASE)
# Spaces, "_" and "-" all fold to one "-" when comparing spellings.
_SEPARATORS = re.compile(r"[\s_-]+")


# The longest list a policy field accepts (strategies, a rule's fault types or levels): far more
# than the closed sets hold, and short enough that a hostile list costs nothing to refuse.
MAX_LIST_ITEMS = 100


def too_many_items(field: str, where: str, count: int, out: IssueCollector) -> None:
    out.error(
        "too_many_items",
        where,
        f"{field} has {count} entries; at most {MAX_LIST_ITEMS} are allowed. List each value once.",
        [0, MAX_LIST_ITEMS],
    )


def is_int(value: Any) -> TypeGuard[int]:
    """True for real integers; ``True``/``False`` are not integers in a policy."""
    return isinstance(value, int) and not isinstance(value, bool)


def suggest(value: Any, choices: Sequence[str]) -> str | None:
    """The closest allowed value to a misspelt one ("recovery" -> "recover"), or None."""
    if not isinstance(value, str):
        return None
    # Compare case-, space-, "_"/"-"-insensitively: "Elastic_Training" and "recover in place" are near misses.
    normalised = {_fold(c): c for c in choices}
    folded = _fold(value)
    if folded in normalised:
        return normalised[folded]
    close = difflib.get_close_matches(folded, list(normalised), n=1, cutoff=0.6)
    return normalised[close[0]] if close else None


def _fold(text: str) -> str:
    return _SEPARATORS.sub("-", text.strip().lower())


def did_you_mean(value: Any, choices: Sequence[str]) -> str:
    guess = suggest(value, choices)
    return f' Did you mean "{guess}"?' if guess is not None and guess != value else ""


def normalise_release(value: Any) -> str | None:
    """A release spelling ("7.1.RC1", "26.1.0", 7.3) reduced to a RELEASES entry, or None."""
    if isinstance(value, float) and value == value and abs(value) < 1e6:
        value = repr(value)  # YAML turns `7.3` into a float; repr keeps "7.3"
    if not isinstance(value, str) or len(value) > 40:
        return None
    match = _RELEASE_RE.match(value.strip())
    if match is None:
        return None
    release = f"{int(match.group(1))}.{int(match.group(2))}"
    return release if release in RELEASES else None


def read_release(raw: Any, out: IssueCollector) -> str | None:
    where = pointer("mindcluster_version")
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        out.error(
            "invalid_type",
            where,
            f'mindcluster_version must be a string such as "7.3", got {json_type(raw)}.',
            list(RELEASES),
        )
        return None
    release = normalise_release(raw)
    if release is None:
        out.error(
            "unsupported_release",
            where,
            f"MindCluster release {describe(raw)} is not supported; rules and rendering exist only for "
            f"{', '.join(RELEASES)}.",
            list(RELEASES),
        )
    return release


def read_int(
    raw: Any, name: str, bounds: tuple[int, int], why: str, out: IssueCollector, where: str | None = None
) -> int | None:
    """An integer within ``bounds`` (inclusive); ``why`` says what the number controls."""
    where = where or pointer(name)
    low, high = bounds
    if not is_int(raw):
        hint = ""
        if isinstance(raw, str) and is_ascii_digits(raw.strip().lstrip("-")):
            hint = " Write it without quotes."
        out.error(
            "invalid_type", where, f"{name} must be an integer, got {json_type(raw)}.{hint}", [low, high]
        )
        return None
    if not low <= raw <= high:
        out.error(
            "out_of_range",
            where,
            f"{name} is {describe(raw)} but must be between {low} and {high}: {why}.",
            [low, high],
        )
        return None
    return int(raw)


def read_bool(raw: Any, name: str, out: IssueCollector, where: str | None = None) -> bool | None:
    where = where or pointer(name)
    if not isinstance(raw, bool):
        hint = ' Use true rather than "on".' if raw in ("on", "off", "true", "false") else ""
        out.error(
            "invalid_type", where, f"{name} must be true or false, got {json_type(raw)}.{hint}", [True, False]
        )
        return None
    return raw


def read_choice(
    raw: Any, name: str, choices: Sequence[str], why: str, out: IssueCollector, where: str | None = None
) -> str | None:
    """One of ``choices``, compared exactly (MindCluster compares label values exactly)."""
    where = where or pointer(name)
    if not isinstance(raw, str):
        out.error("invalid_type", where, f"{name} must be a string, got {json_type(raw)}.", list(choices))
        return None
    if raw not in choices:
        out.error(
            "invalid_choice",
            where,
            f"{name} {describe(raw)} is not one of {', '.join(choices)}; {why}.{did_you_mean(raw, choices)}",
            list(choices),
        )
        return None
    return raw


@dataclass
class StrategyList:
    """The strategies that parsed cleanly, in input order, and where each was first written."""

    names: list[str] = field(default_factory=list)
    where: dict[str, str] = field(default_factory=dict)


def read_strategies(raw: Any, out: IssueCollector) -> StrategyList | None:
    """Parse a JSON list of names or a comma-separated string (as pasted from the YAML annotation)."""
    if isinstance(raw, str):
        entries: list[Any] = raw.split(",") if raw else []
    elif isinstance(raw, list | tuple):
        entries = list(raw)
    else:
        out.error(
            "invalid_type",
            pointer("strategies"),
            f"strategies must be a list of names or a comma-separated string, got {json_type(raw)}.",
            list(STRATEGIES),
        )
        return None

    if len(entries) > MAX_LIST_ITEMS:
        too_many_items("strategies", pointer("strategies"), len(entries), out)
        return None

    def locate(index: int) -> str:
        # A comma-separated string has no per-entry JSON pointer; point at the whole field.
        return pointer("strategies") if isinstance(raw, str) else pointer("strategies", index)

    parsed = StrategyList()
    for index, entry in enumerate(entries):
        name = _read_strategy(entry, locate(index), out)
        if name is None:
            continue
        if name in parsed.where:
            out.warn(
                "duplicate_strategy",
                locate(index),
                f'"{name}" is listed more than once; ClusterD de-duplicates it, so the repeat is redundant.',
                list(STRATEGIES),
            )
            continue
        parsed.names.append(name)
        parsed.where[name] = locate(index)
    return parsed


def _read_strategy(entry: Any, where: str, out: IssueCollector) -> str | None:
    allowed = list(STRATEGIES)
    if not isinstance(entry, str):
        out.error(
            "invalid_type", where, f"A strategy must be a name (string), got {json_type(entry)}.", allowed
        )
        return None
    stripped = entry.strip()
    if not stripped:
        out.warn(
            "empty_strategy",
            where,
            "Empty strategy entry (two commas in a row, or a trailing comma); ClusterD skips it.",
            allowed,
        )
        return None
    if stripped in STRATEGIES and stripped != entry:
        out.error(
            "strategy_whitespace",
            where,
            f"{describe(entry)} has spaces around it; ClusterD does not trim names, so it would silently "
            f'drop it. Write "{stripped}".',
            allowed,
        )
        return None
    if stripped.lower() in STRATEGIES and stripped not in STRATEGIES:
        out.error(
            "strategy_wrong_case",
            where,
            f"{describe(entry)} must be lower case; ClusterD compares names exactly and would silently drop "
            f'it. Write "{stripped.lower()}".',
            allowed,
        )
        return None
    if entry not in STRATEGIES:
        out.error(
            "unknown_strategy",
            where,
            f"{describe(entry)} is not a recovery strategy; ClusterD silently drops unknown names, so this "
            f"entry would do nothing.{did_you_mean(entry, STRATEGIES)}",
            allowed,
        )
        return None
    return entry

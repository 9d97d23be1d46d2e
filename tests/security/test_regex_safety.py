"""Issue #24 item 4: every regular expression in the product runs in linear time on hostile input.

Each pattern is fed about 10 kB of the worst input we could build for it (the shapes that make a
backtracking engine retry: long runs that almost match, repeated prefixes without their closer, digits
that two quantifiers could share) and must finish within a CPU-time bound. The inventory test below
fails when a module-level ``re.compile`` is added to the product without a case here.
"""

from __future__ import annotations

import ast
import importlib
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from apps.api.policies.manifests import _JsonSafeLoader
from apps.core.csp import inline_scripts
from apps.ingest.init_snapshot import _pairs
from apps.ingest.k8s_events import _fault_data
from apps.policies.validation.fields import normalise_release

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("apps", "controlplane", "mindcluster")
SIZE = 10_000
# CPU seconds for one call on 10 kB. A linear pattern needs well under a millisecond; the patterns
# this replaced needed seconds (release: 1.4 s at 25 characters, doubling per character).
BOUND = 0.05


def _cpu_seconds(call: Callable[[], object]) -> float:
    start = time.process_time()
    call()
    return time.process_time() - start


def _hostile(unit: str, tail: str = "x") -> str:
    """``unit`` repeated to about SIZE characters, then a character that makes the match fail late."""
    return unit * max(1, (SIZE - len(tail)) // len(unit)) + tail


# module:NAME -> the worst inputs we know for that pattern (each used with search, the costliest call).
PATTERN_INPUTS: dict[str, list[str]] = {
    "apps.policies.validation.fields:_RELEASE_RE": [
        "7.3" + "1" * SIZE + "x",
        "7." + "1" * SIZE + "-",
        "v7.3" + _hostile("rc1"),
        "7.3" + _hostile(".1"),
    ],
    "apps.policies.validation.fields:_SEPARATORS": [_hostile(" "), _hostile("_- ")],
    "apps.policies.validation.rules:_A2_RING_CONTROLLER": ["ascend-" + _hostile("1"), _hostile("ascend-1")],
    "apps.policies.validation.manifest:_DNS1123_LABEL": ["a" + _hostile("-", "!"), _hostile("a-", "-")],
    "apps.core.api_inputs:DNS1123_LABEL": ["a" + _hostile("-", "!"), _hostile("a-", "-")],
    "apps.accounts.oidc.group_roles:_CLUSTER": [_hostile("a", "!"), _hostile("a.-_")],
    "apps.api.policies.views:_IF_MATCH": [_hostile(" "), '"1' + _hostile(" "), _hostile('W/"')],
    "apps.ingest.init_snapshot:_PAIR": [
        _hostile("a"),
        _hostile("a1"),
        "a" + _hostile(" "),
        _hostile("_a"),
        _hostile("a =  "),
    ],
    "apps.ingest.k8s_events:_FAULT": [
        _hostile("a"),
        _hostile("x fault (code "),
        _hostile("x fault (code 1, level "),
        _hostile("x fault (code 1, level 2) on pod rank 1 (process rank 1, node "),
        _hostile("x fault (code 1, level 2) on pod rank 1 ["),
        "x fault (code 1, level 2) on pod rank " + _hostile("1"),
    ],
    "apps.ingest.k8s_events:_STRATEGY": [_hostile("a"), "a:" + _hostile(" ")],
    "apps.ingest.k8s_events:_OUTCOME": [_hostile("a"), "a succeeded (" + _hostile("a")],
    "apps.ingest.observation:_UID_SUFFIX": [
        _hostile("-"),
        _hostile("a-00000000-"),
        _hostile("-00000000-0000-0000-0000-00000000000"),
    ],
    "apps.core.parsers:_SURROGATE": [_hostile("a")],
    "apps.core.middleware:_SANE": [_hostile("a", "!"), _hostile(".")],
    "mindcluster.wire.protos:_PB2_IMPORT": [
        "import " + _hostile("a"),
        _hostile("\nimport a"),
        _hostile("import a_pb"),
    ],
}


def _pattern(qualified: str) -> re.Pattern[str]:
    module, name = qualified.split(":")
    pattern = getattr(importlib.import_module(module), name)
    assert isinstance(pattern, re.Pattern), f"{qualified} is not a compiled pattern"
    return pattern


@pytest.mark.parametrize(
    ("qualified", "text"),
    [(q, t) for q, texts in PATTERN_INPUTS.items() for t in texts],
    ids=lambda v: v if ":" in str(v) else f"{v[:16]!r}x{len(v)}",
)
def test_each_product_pattern_is_linear_on_its_worst_input(qualified: str, text: str) -> None:
    pattern = _pattern(qualified)
    for call in (pattern.search, pattern.match, pattern.findall):
        seconds = _cpu_seconds(lambda call=call: call(text))  # type: ignore[misc]
        assert seconds < BOUND, f"{qualified}.{call.__name__} took {seconds:.3f} s on {len(text)} chars"


@pytest.mark.parametrize(
    ("name", "call"),
    [
        # The reported ReDoS: 1.4 s at 25 characters before, doubling with each "1".
        ("normalise_release", lambda: normalise_release("7.3" + "1" * 22 + "x")),
        ("normalise_release at its 40-character cap", lambda: normalise_release("7.3" + "1" * 36 + "x")),
        # The reported quadratic Event parse: 4.4 s on 20k characters before.
        ("k8s event fault message", lambda: _fault_data("a" * 20_000)),
        ("k8s event repeated fault prefix", lambda: _fault_data(_hostile("uce fault (code ", "") * 2)),
        ("init snapshot pairs", lambda: _pairs(_hostile("a1") * 2)),
        ("CSP inline scripts", lambda: inline_scripts(_hostile("<script>") * 2)),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_the_product_functions_around_the_patterns_stay_fast(name: str, call: Callable[[], object]) -> None:
    seconds = _cpu_seconds(call)
    assert seconds < BOUND, f"{name} took {seconds:.3f} s"


def test_the_rewritten_patterns_keep_their_meaning() -> None:
    spellings = ("7.3", "7.3.0", "7.1.RC1", "7.1RC1", "v26.1.0", "7.3rc", "7.3-1rc2")
    assert [normalise_release(v) for v in spellings] == ["7.3", "7.3", "7.1", "7.1", "26.1", "7.3", "7.3"]
    refused = ("7.3-", "7.3..1", "7.3r", "7.3x", "7", "\u0667.\u0663")  # the last: Arabic-Indic digits
    assert [normalise_release(v) for v in refused] == [None] * 6
    message = "uce fault (code 80E01801, level RestartBusiness) on pod rank 1 (process rank 3, node n-1) [f9]"
    assert _fault_data(message) == {
        "fault_type": "uce",
        "code": "80E01801",
        "level": "RestartBusiness",
        "pod_rank": 1,
        "ranks": [3],
        "node": "n-1",
        "fault_id": "f9",
    }
    assert _fault_data("node fault (code -, level business) on pod rank 0")["code"] == ""
    assert _pairs("_key=v; 12=a=b; éx : y\nflag=on") == {"key": "v", "a": "b", "x": "y", "flag": "on"}
    assert inline_scripts("<p><script>a()</script><script>b()</script><script>c(") == ["a()", "b()"]


def _yaml_resolver_patterns() -> Iterator[tuple[str, re.Pattern[str]]]:
    seen: set[str] = set()
    for resolvers in _JsonSafeLoader.yaml_implicit_resolvers.values():
        for tag, regexp in resolvers:
            if regexp.pattern not in seen:
                seen.add(regexp.pattern)
                yield tag, regexp


YAML_SCALARS = [
    _hostile("1"),
    _hostile("1_"),
    _hostile("1:"),
    _hostile("1:5"),
    "0." + _hostile("_"),
    "-" + _hostile("0_", "e"),
    _hostile(".inf"),
    _hostile("0b1"),
    _hostile("0x1"),
]


@pytest.mark.parametrize("text", YAML_SCALARS, ids=lambda t: f"{t[:8]!r}")
def test_the_yaml_scalar_resolvers_the_manifest_parser_keeps_are_linear(text: str) -> None:
    for tag, regexp in _yaml_resolver_patterns():
        seconds = _cpu_seconds(lambda regexp=regexp: regexp.match(text))  # type: ignore[misc]
        assert seconds < BOUND, f"YAML resolver {tag} took {seconds:.3f} s"


def test_every_url_pattern_is_linear_on_long_paths() -> None:
    from django.urls import get_resolver

    def walk(patterns: list[object], prefix: str = "") -> Iterator[re.Pattern[str]]:
        for entry in patterns:
            yield entry.pattern.regex  # type: ignore[attr-defined]
            yield from walk(getattr(entry, "url_patterns", []))

    paths = [_hostile("a/"), _hostile("1"), _hostile("api/v1/jobs/1/"), _hostile("-_")]
    for regex in walk(get_resolver().url_patterns):
        for path in paths:
            seconds = _cpu_seconds(lambda regex=regex, path=path: regex.search(path))  # type: ignore[misc]
            assert seconds < BOUND, f"URL pattern {regex.pattern!r} took {seconds:.3f} s"


def _compiled_patterns_in_product() -> Iterator[str]:
    """``module:NAME`` for every module-level ``NAME = re.compile(...)`` in the product's packages."""
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            for node in tree.body:
                if (
                    isinstance(node, ast.Assign)
                    and isinstance(node.value, ast.Call)
                    and ast.unparse(node.value.func) == "re.compile"
                ):
                    for target in node.targets:
                        yield f"{module}:{ast.unparse(target)}"


def _inline_regex_calls_in_product() -> Iterator[str]:
    """``path:line`` of ``re.search(...)``-style calls with a pattern written inline (not reviewable here)."""
    functions = {"match", "fullmatch", "search", "sub", "subn", "split", "findall", "finditer"}
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "re"
                    and node.func.attr in functions
                ):
                    yield f"{path.relative_to(ROOT)}:{node.lineno}"


def test_every_pattern_in_the_product_has_a_hostile_input_case_here() -> None:
    found = set(_compiled_patterns_in_product())
    assert found - set(PATTERN_INPUTS) == set(), "add a worst-input case for each new pattern"
    assert set(PATTERN_INPUTS) - found == set(), "a listed pattern no longer exists"
    assert list(_inline_regex_calls_in_product()) == [], "compile patterns at module level so they are listed"

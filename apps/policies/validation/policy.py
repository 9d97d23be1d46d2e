"""``validate_policy``: untrusted JSON in, a ``ValidationResult`` (and a ``PolicySpec``) out."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, cast

from apps.policies.spec import (
    BOUNDS,
    FAULT_SCHEDULING_VALUES,
    SUB_HEALTHY_VALUES,
    JobContext,
    PolicySpec,
    sort_strategies,
)

from .fields import did_you_mean, is_int, read_bool, read_choice, read_int, read_release, read_strategies
from .issues import IssueCollector, ValidationResult, describe, json_type, key_text, pointer
from .platform import ParsedRules, check_platform, read_default_strategy, read_rules
from .rules import Draft, check_all

FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(PolicySpec))
# Keys accepted inside the object form of decision_rules (design.md §4.1 calls the timeout timeout_s).
_RULES_OBJECT_KEYS = ("rules", "default_strategy", "decision_timeout_s", "timeout_s")

# Why each bounded number has its bounds, for out_of_range messages.
_WHY = {
    "fault_retry_times": "it is the unconditional-retry budget and 0 turns it off",
    "max_restarts": "torchrun's --max_restarts; TaskD's default is the maximum, 32767",
    "monitor_interval": "torchrun's --monitor_interval in seconds",
    "wait_reschedule_timeout": "ClusterD only accepts 30-270 seconds for wait-reschedule-timeout",
    "ttp_port": "the MindIO controller needs an unprivileged TCP port",
    "decision_timeout_s": (
        "the platform must answer safely inside ClusterD's 300 s wait, after which it falls back on its own"
    ),
}


def validate_policy(raw: Any, job: JobContext | None = None) -> ValidationResult:
    """Check a policy spec (and, when given, against the job it is meant for). Never raises."""
    out = IssueCollector()
    spec: PolicySpec | None = None
    try:
        spec = _validate(raw, job if isinstance(job, JobContext) else None, out)
    except Exception as exc:  # a bug here must surface as a result, not a 500 or a crashed worker
        out.error(
            "internal_error",
            "/",
            f"The validator failed unexpectedly ({type(exc).__name__}); please report this policy.",
        )
    errors = out.errors
    return ValidationResult(errors=errors, warnings=out.warnings, spec=None if errors else spec)


def _validate(raw: Any, job: JobContext | None, out: IssueCollector) -> PolicySpec | None:
    if not isinstance(raw, Mapping):
        out.error("not_an_object", "/", f"A policy must be a JSON object, got {json_type(raw)}.")
        return None
    data = dict(raw)
    rules_base = _unpack_rules_object(data, out)
    for key in data:
        if not isinstance(key, str) or key not in FIELD_NAMES:
            out.error(
                "unknown_field",
                pointer(key_text(key)),
                f"{describe(key)} is not a policy field.{did_you_mean(key, FIELD_NAMES)}",
                list(FIELD_NAMES),
            )
    draft = Draft(values={f.name: getattr(PolicySpec(), f.name) for f in fields(PolicySpec)})
    parsed_rules: ParsedRules | None = None
    for name in FIELD_NAMES:
        if name not in data:
            continue
        draft.given.add(name)
        if name == "decision_rules":
            parsed_rules = read_rules(data[name], rules_base, out)
            value: Any = tuple(parsed_rules.rules) if parsed_rules else None
        elif name == "strategies":
            parsed = read_strategies(data[name], out)
            value = parsed.names if parsed else None
            draft.strategy_where = parsed.where if parsed else {}
        else:
            value = _READERS[name](data[name], out)
        if value is None and name != "backoff_limit":
            draft.bad.add(name)
        else:
            draft.values[name] = value
    if draft.usable("platform_mode", "strategies", "decision_rules"):
        default = draft.values["default_strategy"] if draft.usable("default_strategy") else None
        check_platform(
            platform_mode=bool(draft.values["platform_mode"]),
            strategies=draft.strategies,
            parsed=parsed_rules,
            rules_base=rules_base,
            default_strategy=default if isinstance(default, str) else None,
            default_given="default_strategy" in draft.given,
            timeout_given="decision_timeout_s" in draft.given,
            timeout_is_default=draft.values["decision_timeout_s"] == PolicySpec().decision_timeout_s,
            out=out,
        )
    check_all(draft, job, out)
    if out.errors:
        return None
    values = dict(draft.values)
    values["strategies"] = sort_strategies(draft.strategies)
    # Each value came from its field's reader (or the PolicySpec default), so it has that field's type.
    return PolicySpec(**cast("dict[str, Any]", values))


def _unpack_rules_object(data: dict[Any, Any], out: IssueCollector) -> tuple[str | int, ...]:
    """Accept ``decision_rules`` as ``{"rules": [...], "default_strategy", "timeout_s"}`` too.

    The canonical (stored) shape keeps the list under ``decision_rules`` and the other two as top-level
    keys; this folds the object shape into it and returns the pointer base of the rule list.
    """
    block = data.get("decision_rules")
    if not isinstance(block, Mapping):
        return ("decision_rules",)
    for key in block:
        if key not in _RULES_OBJECT_KEYS:
            out.error(
                "unknown_field",
                pointer("decision_rules", key_text(key)),
                f"{describe(key)} is not a decision_rules key.{did_you_mean(key, _RULES_OBJECT_KEYS)}",
                list(_RULES_OBJECT_KEYS),
            )
    data["decision_rules"] = block.get("rules", [])
    aliases = {
        "default_strategy": ("default_strategy",),
        "decision_timeout_s": ("decision_timeout_s", "timeout_s"),
    }
    for top, inner_keys in aliases.items():
        for inner in inner_keys:
            if inner not in block:
                continue
            if top in data and data[top] != block[inner]:
                out.error(
                    "conflicting_fields",
                    pointer("decision_rules", inner),
                    f"decision_rules.{inner} and the top-level {top} disagree; give it once.",
                )
            data[top] = block[inner]
    return ("decision_rules", "rules")


def _bounded(name: str) -> Callable[[Any, IssueCollector], int | None]:
    def read(raw: Any, out: IssueCollector) -> int | None:
        return read_int(raw, name, BOUNDS[name], _WHY[name], out)

    return read


def _read_backoff_limit(raw: Any, out: IssueCollector) -> int | None:
    if raw is None:
        return None  # unlimited
    low, high = BOUNDS["backoff_limit"]
    if is_int(raw) and raw == 0:
        out.error(
            "out_of_range",
            pointer("backoff_limit"),
            f"backoff_limit must be between {low} and {high}; the operator reads 0 as unlimited, so "
            f"write null for unlimited.",
            [low, high],
        )
        return None
    return read_int(
        raw, "backoff_limit", (low, high), "runPolicy.backoffLimit is an int32; null means unlimited", out
    )


_READERS: dict[str, Callable[[Any, IssueCollector], Any]] = {
    "mindcluster_version": read_release,
    "fault_scheduling": lambda raw, out: read_choice(
        raw,
        "fault_scheduling",
        FAULT_SCHEDULING_VALUES,
        "Volcano treats any other value as off, which disables Job-level rescheduling",
        out,
    ),
    "pod_rescheduling": lambda raw, out: read_bool(raw, "pod_rescheduling", out),
    "platform_mode": lambda raw, out: read_bool(raw, "platform_mode", out),
    "sub_healthy_strategy": lambda raw, out: read_choice(
        raw, "sub_healthy_strategy", SUB_HEALTHY_VALUES, "the subHealthyStrategy label takes only these", out
    ),
    "default_strategy": read_default_strategy,
    "backoff_limit": _read_backoff_limit,
    **{name: _bounded(name) for name in _WHY},
}

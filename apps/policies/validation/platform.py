"""Platform-mode decision rules: parsing each rule and checking the rules against the strategies.

In platform mode ClusterD asks the control plane which strategy to use (PodGroup annotation
``ProcessRecoverStrategy``) and uses a strategy only if it is configured in ``recover-strategy``
AND equals the answer (mindcluster.md §6.4). The answer may only be retry, recover, dump or exit,
and the standing answer kept there between faults (``default_strategy``) only retry, recover or dump.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from apps.policies.spec import DECISION_ACTIONS, FAULT_TYPES, PLATFORM_STRATEGIES, DecisionRule
from mindcluster.faults import REPORTED_LEVELS

from .fields import MAX_LIST_ITEMS, did_you_mean, is_int, read_bool, read_choice, read_int, too_many_items
from .issues import IssueCollector, describe, json_type, key_text, pointer

MATCH_KEYS = (
    "fault_type",
    "fault_level",
    "min_ranks",
    "max_ranks",
    "rank0",
    "repeat_within_s",
    "min_repeats",
)
RULE_KEYS = ("match", "strategy")
# ClusterD waits for the answer (it polls every 3 s, for at most 300 s), and anyone signed in may
# validate a spec: far more rules than a person writes, far fewer than a costly document (issue #16:
# 30,000 rules took 2.9 s of CPU to validate, and the decider reads one window per distinct
# ``repeat_within_s``). Counted before any rule is read.
MAX_DECISION_RULES = 100
_INT32_MAX = 2_147_483_647
# Fault levels MindCluster reports: chip, node and switch handling levels plus node health (§6.2, §6.3).
KNOWN_FAULT_LEVELS = REPORTED_LEVELS
# Strategies that exist in recover-strategy but that ProcessRecoverStrategy cannot carry.
_NOT_ANSWERABLE = ("recover-in-place", "elastic-training")


@dataclass
class ParsedRules:
    """Rules that parsed cleanly, plus the JSON pointer of every rule (kept for cross checks)."""

    rules: list[DecisionRule] = field(default_factory=list)
    where: list[tuple[str | int, ...]] = field(default_factory=list)
    complete: bool = True  # False when any rule had an error (then no spec is produced anyway)


def read_rules(raw: Any, base: tuple[str | int, ...], out: IssueCollector) -> ParsedRules | None:
    """An ordered list of ``{"match": {...}, "strategy": ...}`` objects."""
    if not isinstance(raw, list | tuple):
        out.error(
            "invalid_type", pointer(*base), f"decision_rules must be a list of rules, got {json_type(raw)}."
        )
        return None
    if len(raw) > MAX_DECISION_RULES:
        out.error(
            "too_many_decision_rules",
            pointer(*base),
            f"decision_rules has {len(raw)} rules; at most {MAX_DECISION_RULES} are allowed. "
            "Merge rules with the same strategy (a match may list several fault types or levels).",
        )
        return None
    parsed = ParsedRules()
    for index, item in enumerate(raw):
        rule = _read_rule(item, (*base, index), out)
        if rule is None:
            parsed.complete = False
            continue
        parsed.rules.append(rule)
        parsed.where.append((*base, index))
    return parsed


def _read_rule(raw: Any, base: tuple[str | int, ...], out: IssueCollector) -> DecisionRule | None:
    if not isinstance(raw, dict):
        out.error(
            "invalid_type",
            pointer(*base),
            f'A decision rule must be an object {{"match": ..., "strategy": ...}}, got {json_type(raw)}.',
        )
        return None
    ok = True
    for key in raw:
        if key not in RULE_KEYS:
            out.error(
                "unknown_field",
                pointer(*base, key_text(key)),
                f"Decision rules have only match and strategy, not {describe(key)}."
                f"{did_you_mean(key, RULE_KEYS)}",
                list(RULE_KEYS),
            )
            ok = False
    strategy = _read_rule_strategy(raw, base, out)
    match = _read_match(raw.get("match", {}), (*base, "match"), out)
    if strategy is None or match is None or not ok:
        return None
    return DecisionRule(strategy=strategy, match=match)


def _read_rule_strategy(raw: dict[Any, Any], base: tuple[str | int, ...], out: IssueCollector) -> str | None:
    where = pointer(*base, "strategy")
    if "strategy" not in raw:
        out.error(
            "missing_field",
            where,
            'Every decision rule needs a strategy ("ask" lets a person decide).',
            list(DECISION_ACTIONS),
        )
        return None
    value = raw["strategy"]
    if value in _NOT_ANSWERABLE:
        out.error(
            "platform_strategy_unsupported",
            where,
            f"A platform can answer only {', '.join(DECISION_ACTIONS)}; ClusterD's ProcessRecoverStrategy "
            f'does not accept "{value}" (recover-in-place runs as part of a "recover" answer).',
            list(DECISION_ACTIONS),
        )
        return None
    return read_choice(
        value,
        "strategy",
        DECISION_ACTIONS,
        '"ask" lets a person decide, the others are what ClusterD accepts',
        out,
        where,
    )


def _read_match(raw: Any, base: tuple[str | int, ...], out: IssueCollector) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        out.error(
            "invalid_type",
            pointer(*base),
            f"match must be an object, got {json_type(raw)}.",
            list(MATCH_KEYS),
        )
        return None
    match: dict[str, Any] = {}
    ok = True
    for key, value in raw.items():
        where = pointer(*base, key_text(key))
        if key not in MATCH_KEYS:
            out.error(
                "unknown_match_key",
                where,
                f"{describe(key)} is not a match key, so the rule engine cannot evaluate it."
                f"{did_you_mean(key, MATCH_KEYS)}",
                list(MATCH_KEYS),
            )
            ok = False
            continue
        clean = _read_match_value(key, value, where, out)
        if clean is None:
            ok = False
        else:
            match[key] = clean
    ok = _check_match_relations(match, base, out) and ok
    return match if ok else None


def _read_match_value(key: str, value: Any, where: str, out: IssueCollector) -> Any:
    if key == "fault_type":
        return _read_string_list(value, key, where, out, FAULT_TYPES)
    if key == "fault_level":
        levels = _read_string_list(value, key, where, out, None)
        for level in levels or []:
            if level not in KNOWN_FAULT_LEVELS:
                out.warn(
                    "unknown_fault_level",
                    where,
                    f"Fault level {describe(level)} is not one MindCluster is known to report, so this "
                    f"rule may never match.{did_you_mean(level, KNOWN_FAULT_LEVELS)}",
                    list(KNOWN_FAULT_LEVELS),
                )
        return levels
    if key == "rank0":
        return read_bool(value, key, out, where)
    bounds = {
        "min_ranks": (1, _INT32_MAX),
        "max_ranks": (1, _INT32_MAX),
        "repeat_within_s": (1, 86_400),
        "min_repeats": (2, _INT32_MAX),
    }[key]
    why = {
        "min_ranks": "it counts faulty ranks",
        "max_ranks": "it counts faulty ranks",
        "repeat_within_s": "the look-back window is at most one day",
        "min_repeats": "one occurrence is not a repeat",
    }[key]
    return read_int(value, key, bounds, why, out, where)


def _read_string_list(
    value: Any, key: str, where: str, out: IssueCollector, allowed: tuple[str, ...] | None
) -> list[str] | None:
    """A list of strings (a single string is accepted and becomes a one-item list), de-duplicated."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        out.error(
            "invalid_type",
            where,
            f"{key} must be a string or a list of strings, got {json_type(value)}.",
            list(allowed) if allowed else None,
        )
        return None
    if len(items) > MAX_LIST_ITEMS:
        too_many_items(key, where, len(items), out)
        return None
    clean: list[str] = []
    seen: set[str] = set()  # the duplicate check stays linear (a list scan made 20k levels take 6 s)
    ok = True
    for index, item in enumerate(items):
        item_where = where if isinstance(value, str) else f"{where}/{index}"
        if not isinstance(item, str) or not item:
            out.error(
                "invalid_type",
                item_where,
                f"{key} entries must be non-empty strings, got {describe(item)}.",
                list(allowed) if allowed else None,
            )
            ok = False
        elif allowed is not None and item not in allowed:
            out.error(
                "invalid_choice",
                item_where,
                f"{key} {describe(item)} is not one of {', '.join(allowed)} (the fault kinds ClusterD "
                f"reports).{did_you_mean(item, allowed)}",
                list(allowed),
            )
            ok = False
        elif item not in seen:
            seen.add(item)
            clean.append(item)
    if not ok:
        return None
    if not clean:
        out.warn(
            "rule_never_matches",
            where,
            f"An empty {key} list matches no fault, so this rule never fires; drop the key to match any.",
        )
    return clean


def _check_match_relations(match: dict[str, Any], base: tuple[str | int, ...], out: IssueCollector) -> bool:
    ok = True
    low, high = match.get("min_ranks"), match.get("max_ranks")
    if is_int(low) and is_int(high) and high < low:
        out.error(
            "max_ranks_below_min_ranks",
            pointer(*base, "max_ranks"),
            f"max_ranks {high} is smaller than min_ranks {low}, so this rule can never match.",
        )
        ok = False
    if "min_repeats" in match and "repeat_within_s" not in match:
        out.error(
            "min_repeats_without_window",
            pointer(*base, "min_repeats"),
            "min_repeats counts faults within a time window; set repeat_within_s as well.",
        )
        ok = False
    return ok


def check_platform(
    *,
    platform_mode: bool,
    strategies: list[str],
    parsed: ParsedRules | None,
    rules_base: tuple[str | int, ...],
    default_strategy: str | None,
    default_given: bool,
    timeout_given: bool,
    timeout_is_default: bool,
    out: IssueCollector,
) -> None:
    """Cross checks between platform_mode, the configured strategies and the decision rules."""
    rules = parsed.rules if parsed else []
    if not platform_mode:
        if rules:
            out.error(
                "decision_rules_without_platform_mode",
                pointer(*rules_base),
                "decision_rules only run when platform_mode is true; without it ClusterD chooses by itself "
                "and these rules would be ignored.",
            )
        if default_given and default_strategy not in (None, "recover"):
            out.warn(
                "platform_setting_ignored",
                pointer("default_strategy"),
                "default_strategy has no effect unless platform_mode is true.",
            )
        if timeout_given and not timeout_is_default:
            out.warn(
                "platform_setting_ignored",
                pointer("decision_timeout_s"),
                "decision_timeout_s has no effect unless platform_mode is true.",
            )
        return
    if not strategies:
        out.error(
            "platform_mode_without_strategies",
            pointer("platform_mode"),
            "platform_mode needs at least one strategy: ClusterD only asks the platform to choose among "
            "configured strategies, so there would be nothing to decide.",
        )
        return
    for rule, where in zip(rules, parsed.where if parsed else [], strict=True):
        if rule.strategy in ("ask", "exit") or rule.strategy in strategies:
            continue
        out.error(
            "rule_strategy_not_configured",
            pointer(*where, "strategy"),
            _not_configured_message(f'Rule {where[-1]} answers "{rule.strategy}"', rule.strategy, strategies),
            _answerable(strategies),
        )
    if default_strategy == "exit":
        out.error(
            "standing_answer_not_accepted",
            pointer("default_strategy"),
            STANDING_WHY + ' "exit" is accepted only as the final answer, so every fault would wait '
            "300 s and fail with code 508.",
            _standing(strategies),
        )
    elif default_strategy is not None and default_strategy not in strategies:
        out.error(
            "default_strategy_not_configured",
            pointer("default_strategy"),
            _not_configured_message(
                f'default_strategy is "{default_strategy}"', default_strategy, strategies
            ),
            _answerable(strategies),
        )
    if "elastic-training" in strategies:
        # Scale-in is the one choice ClusterD makes without the platform: chooseForRestartProcessFail
        # takes it whenever recover is not usable (canChooseScaleInStrategy, controller.go:1107-1135:
        # rank-0 pod healthy, agent reports downgrade, no rescheduling or no spare resources), so a
        # dump or retry answer may end in elastic-training.
        out.warn(
            "platform_scale_in_without_answer",
            pointer("strategies"),
            "In platform_mode ProcessRecoverStrategy cannot carry elastic-training, but ClusterD still "
            "chooses it on its own when recover is not usable (the platform did not answer recover, or "
            "recover failed) and the rank-0 pod is healthy: a dump or retry answer may end in scale-in.",
        )
    _check_unreachable(rules, parsed.where if parsed else [], out)
    _check_retry_answers(rules, parsed.where if parsed else [], default_strategy, strategies, out)


def _check_retry_answers(
    rules: list[DecisionRule],
    where: list[tuple[str | int, ...]],
    default_strategy: str | None,
    strategies: list[str],
    out: IssueCollector,
) -> None:
    """ClusterD routes a UCE/HCCL fault by the answer it finds BEFORE it asks.

    ``takeRetryFault2NormalFault`` (``controller.go:838-857``) runs before ``ProcessConfirmFault`` is
    written and keeps a fault on the retry path only if ``supportRetryStrategy`` holds, which in
    platform mode means the standing answer is retry (``controller.go:364-370``). With another standing
    answer the fault is already "normal", and a later "retry" answer finds nothing usable
    (``firstChooseStrategy``, ``controller.go:1096-1119``): the job exits.
    """
    if default_strategy in (None, "retry") or "retry" not in strategies:
        return
    for rule, at in zip(rules, where, strict=True):
        if rule.strategy == "retry":
            out.warn(
                "retry_answer_needs_standing_retry",
                pointer(*at, "strategy"),
                f'Rule {at[-1]} answers "retry", but the standing answer (default_strategy) is '
                f'"{default_strategy}": ClusterD decides whether a UCE/HCCL fault takes the retry path '
                "from the answer it finds before it asks, so this retry answer would end in exit. Set "
                'default_strategy to "retry" (other answers still work after a standing retry).',
                ["retry"],
            )
            return


STANDING_WHY = (
    "default_strategy is the standing answer the control plane keeps in ProcessRecoverStrategy: at "
    "every fault, before it stops training or asks anything, ClusterD waits until that annotation is "
    "retry, recover or dump (fault_recover_platform_plugin.go:19-57)."
)
STANDING_ANSWERS = ("retry", "recover", "dump")


def read_default_strategy(raw: Any, out: IssueCollector) -> str | None:
    """``default_strategy``: one of retry/recover/dump/exit; "ask" gets its own reason."""
    if raw == "ask":
        out.error(
            "standing_answer_not_accepted",
            pointer("default_strategy"),
            STANDING_WHY + ' "ask" cannot stand there (nobody can answer before the fault): use a rule '
            'with "strategy": "ask"; its question falls back to default_strategy at the deadline.',
            list(STANDING_ANSWERS),
        )
        return None
    return read_choice(
        raw,
        "default_strategy",
        PLATFORM_STRATEGIES,
        "ClusterD's ProcessRecoverStrategy accepts only these",
        out,
    )


def _standing(strategies: list[str]) -> list[str]:
    return [s for s in STANDING_ANSWERS if s in strategies]


def _answerable(strategies: list[str]) -> list[str]:
    return [s for s in PLATFORM_STRATEGIES if s in strategies or s == "exit"]


def _not_configured_message(subject: str, strategy: str, strategies: list[str]) -> str:
    message = (
        f"{subject}, which the policy does not configure; ClusterD uses an answer only if it is also in "
        f"strategies, so it would fall through to the next strategy."
    )
    if strategy == "recover" and "recover-in-place" in strategies:
        message += (
            ' Only recover-in-place is configured: add "recover" to strategies (in-place restart runs '
            'as part of a "recover" answer).'
        )
    return message


def _check_unreachable(
    rules: list[DecisionRule], where: list[tuple[str | int, ...]], out: IssueCollector
) -> None:
    for index, rule in enumerate(rules):
        if not rule.match and index + 1 < len(rules):
            later = where[index + 1]
            out.warn(
                "rule_unreachable",
                pointer(*later),
                f"Rule {where[index][-1]} has an empty match and catches every fault, so this rule and "
                f"all after it never run.",
            )
            return

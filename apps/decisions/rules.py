"""Evaluating a policy's ordered ``decision_rules`` against one ClusterD question. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from apps.core.numbers import is_ascii_digits
from apps.policies.spec import DecisionRule, PolicySpec
from mindcluster.faults import FAULT_HCCL, FAULT_OTHER, FAULT_UCE

# ProcessConfirmFault type digits (mindcluster.md §6.4): 0 = only on-chip-memory faults, 1 = other.
CONFIRM_TYPE_NAMES = {FAULT_UCE: "uce", FAULT_OTHER: "normal", FAULT_HCCL: "hccl"}


@dataclass(frozen=True)
class FaultFacts:
    """What is known about the faults in one question."""

    ranks: tuple[int, ...]
    fault_types: frozenset[str]  # names from spec.FAULT_TYPES
    fault_levels: frozenset[str]
    repeats_in_window: dict[int, int]  # window seconds -> faults of this job within it (this one included)


@dataclass(frozen=True)
class Verdict:
    strategy: str  # a platform strategy, or "ask"
    decided_by: str
    reason: str


def parse_confirm_fault(value: str) -> list[dict[str, object]]:
    """``"3:0,8:1"`` → ``[{"rank": 3, "type": "0"}, {"rank": 8, "type": "1"}]``; junk entries skipped."""
    faults: list[dict[str, object]] = []
    for item in value.split(","):
        rank, sep, kind = item.strip().partition(":")
        if sep and is_ascii_digits(rank.strip().lstrip("-")):
            faults.append({"rank": int(rank), "type": kind.strip() or "1"})
    return faults


def _matches(rule: DecisionRule, facts: FaultFacts) -> bool:
    match = rule.match
    if "fault_type" in match:
        wanted = match["fault_type"]
        wanted_set = {wanted} if isinstance(wanted, str) else set(wanted)
        if not facts.fault_types & wanted_set:
            return False
    if "fault_level" in match:
        wanted = match["fault_level"]
        wanted_set = {wanted} if isinstance(wanted, str) else set(wanted)
        if not facts.fault_levels & wanted_set:
            return False
    count = len(facts.ranks)
    if "min_ranks" in match and count < int(match["min_ranks"]):
        return False
    if "max_ranks" in match and count > int(match["max_ranks"]):
        return False
    if "rank0" in match and (0 in facts.ranks) != bool(match["rank0"]):
        return False
    if "repeat_within_s" in match:
        repeats = facts.repeats_in_window.get(int(match["repeat_within_s"]), 1)
        if repeats < int(match.get("min_repeats", 2)):
            return False
    return True


def describe(rule: DecisionRule) -> str:
    parts = [f"{key}={value}" for key, value in sorted(rule.match.items())]
    return " and ".join(parts) or "any fault"


def evaluate(spec: PolicySpec, facts: FaultFacts) -> Verdict:
    """The first matching rule decides; no match → the policy's default strategy."""
    for index, rule in enumerate(spec.decision_rules):
        if _matches(rule, facts):
            what = "asks a person" if rule.strategy == "ask" else f"chooses {rule.strategy}"
            return Verdict(rule.strategy, f"rule:{index}", f"rule {index} ({describe(rule)}) {what}")
    return Verdict(spec.default_strategy, "default", "no rule matched: the policy's default strategy")


def window_lengths(spec: PolicySpec) -> set[int]:
    return {
        int(rule.match["repeat_within_s"]) for rule in spec.decision_rules if "repeat_within_s" in rule.match
    }

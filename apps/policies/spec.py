"""The recovery-policy spec (design.md §4.1) and the job facts the rules depend on.

Pure data: no Django, no I/O. ``validation.validate_policy`` turns untrusted JSON into a
``PolicySpec``; rendering and the simulators consume ``PolicySpec`` and ``JobContext``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Final

# The release and strategy vocabulary is MindCluster's own (``mindcluster``); the policy spec speaks
# it, and re-exports it so the product reads one module for "what a policy may say".
# What an AscendJob manifest says about the job a policy is for.
from mindcluster.ascendjob import JobContext as JobContext
from mindcluster.ascendjob import ReplicaFacts as ReplicaFacts
from mindcluster.ascendjob import npus_in as npus_in
from mindcluster.keys import FRAMEWORKS as FRAMEWORKS
from mindcluster.releases import DEFAULT_RELEASE as DEFAULT_RELEASE
from mindcluster.releases import RELEASES as RELEASES
from mindcluster.releases import release_at_least as release_at_least
from mindcluster.strategies import PLATFORM_STRATEGIES as PLATFORM_STRATEGIES
from mindcluster.strategies import PROCESS_STRATEGIES as PROCESS_STRATEGIES
from mindcluster.strategies import STRATEGIES as STRATEGIES
from mindcluster.strategies import STRATEGY_PRIORITY as STRATEGY_PRIORITY
from mindcluster.strategies import STRATEGY_SINCE as STRATEGY_SINCE
from mindcluster.strategies import sort_strategies as sort_strategies

FAULT_SCHEDULING_VALUES: Final = ("grace", "force", "off")
SUB_HEALTHY_VALUES: Final = ("ignore", "graceExit", "forceExit", "hotSwitch")
# "ask" = a person decides.
DECISION_ACTIONS: Final = (*PLATFORM_STRATEGIES, "ask")
FAULT_TYPES: Final = ("uce", "hccl", "normal", "node")

# Bounds from design.md §4.1.
BOUNDS: Final = {
    "fault_retry_times": (0, 100_000),
    "backoff_limit": (1, 2_147_483_647),
    "max_restarts": (0, 32_767),
    "monitor_interval": (1, 3_600),
    "wait_reschedule_timeout": (30, 270),
    "ttp_port": (1_024, 65_535),
    "decision_timeout_s": (1, 290),
}


@dataclass(frozen=True)
class DecisionRule:
    """One platform-mode rule: the first rule whose ``match`` holds decides."""

    strategy: str  # one of DECISION_ACTIONS
    # Keys, all optional, all must hold: fault_type (list of FAULT_TYPES), fault_level (list of str),
    # min_ranks / max_ranks (int), rank0 (bool), repeat_within_s + min_repeats (int).
    match: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PolicySpec:
    """A validated recovery policy. Build it through ``validation.validate_policy``."""

    mindcluster_version: str = DEFAULT_RELEASE
    strategies: tuple[str, ...] = ()
    fault_scheduling: str = "grace"
    pod_rescheduling: bool = False
    fault_retry_times: int = 0
    backoff_limit: int | None = None
    max_restarts: int = 32_767
    monitor_interval: int = 30
    wait_reschedule_timeout: int = 270
    sub_healthy_strategy: str = "ignore"
    ttp_port: int = 8_000
    platform_mode: bool = False
    decision_rules: tuple[DecisionRule, ...] = ()
    default_strategy: str = "recover"
    decision_timeout_s: int = 240

    @property
    def strategy_annotation(self) -> str:
        """The ``recover-strategy`` value ClusterD parses: priority order, commas, no spaces."""
        return ",".join(sort_strategies(self.strategies))

    @property
    def has_process_strategies(self) -> bool:
        return bool(self.strategies)

    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON form (what is stored in a PolicyRevision and returned by the API)."""
        data = asdict(self)
        data["strategies"] = list(sort_strategies(self.strategies))
        data["decision_rules"] = [
            {"match": dict(rule.match), "strategy": rule.strategy} for rule in self.decision_rules
        ]
        return data

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> PolicySpec:
        """Rebuild a spec from its canonical form (``to_dict()``, what a ``PolicyRevision`` stores).

        No validation: every stored spec was validated when it was stored (``policy_revision_create``,
        admission's ``_record``), and revisions are immutable. Raises ``TypeError`` / ``KeyError`` /
        ``ValueError`` on a shape ``to_dict()`` never produces (a field renamed or dropped since).
        """
        values = dict(data)
        values["strategies"] = tuple(values.get("strategies") or ())
        values["decision_rules"] = tuple(
            DecisionRule(strategy=str(rule["strategy"]), match=dict(rule.get("match") or {}))
            for rule in values.get("decision_rules") or ()
        )
        return cls(**values)


# --- job facts -----------------------------------------------------------------------------------

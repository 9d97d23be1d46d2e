"""The fleet figures of a set of incidents, as plain values that add and subtract.

``Tally`` is what a ``JobDay`` or ``NamespaceDay`` row stores (``apps.fleet.models.Figures``): a row is
kept in step by adding the difference between a job-day's new tally and its old one, so a closed
incident that changes again (a late outcome, a merged fault report) is counted once, as it is now.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apps.advice.history import fault_type
from apps.advice.lost import incident_loss
from apps.fleet import histogram

# The stored columns of ``apps.fleet.models.Figures``: numbers (summed by SQL), then JSON maps.
NUMBER_FIELDS: Final = (
    "faults",
    "detection_npu_s",
    "decision_npu_s",
    "recovery_npu_s",
    "rollbacks",
    "rollback_npus",
)
FIELDS: Final = (*NUMBER_FIELDS, "by_kind", "recoveries", "by_strategy", "mttr", "sources")
# What a closed incident row must carry to be counted.
INCIDENT_FIELDS: Final = (
    "opened_at",
    "closed_at",
    "outcome",
    "fault",
    "strategies",
    "attempts",
    "detect_ms",
    "decide_ms",
    "recover_ms",
)
_NOT_A_FINAL_STRATEGY: Final = frozenset({"exit", "dump"})


def final_strategy(strategies: list[str]) -> str:
    """The strategy that ended the incident: the last one tried that can bring training back."""
    for strategy in reversed(strategies):
        if strategy not in _NOT_A_FINAL_STRATEGY:
            return strategy
    return "none"


@dataclass
class Tally:
    faults: int = 0
    detection_npu_s: float = 0.0
    decision_npu_s: float = 0.0
    recovery_npu_s: float = 0.0
    rollbacks: int = 0
    rollback_npus: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    recoveries: Counter[str] = field(default_factory=Counter)
    by_strategy: dict[str, Counter[str]] = field(default_factory=dict)
    # {final strategy: {bucket: recoveries}}: time to recovery as a histogram (``apps.fleet.histogram``)
    mttr: dict[str, Counter[str]] = field(default_factory=dict)
    sources: dict[str, Counter[str]] = field(default_factory=dict)

    # --- building ---------------------------------------------------------------------------------
    @classmethod
    def of_incidents(cls, rows: Iterable[Mapping[str, Any]], npus: int) -> Tally:
        tally = cls()
        for row in rows:
            tally.add_incident(row, npus)
        return tally

    def add_incident(self, row: Mapping[str, Any], npus: int) -> None:
        loss = incident_loss(row)
        self.faults += 1
        self.detection_npu_s += loss.detection_s * npus
        self.decision_npu_s += loss.decision_s * npus
        self.recovery_npu_s += loss.recovery_s * npus
        if loss.rollback:
            self.rollbacks += 1
            self.rollback_npus += npus
        for component, source in loss.sources.items():
            if component != "rollback" or loss.rollback:
                self.sources.setdefault(component, Counter())[source] += 1
        self.by_kind[fault_type(dict(row.get("fault") or {}))] += 1
        outcome = str(row.get("outcome") or "unknown")
        self.recoveries[outcome] += 1
        strategy = final_strategy([str(s) for s in row.get("strategies") or []])
        self.by_strategy.setdefault(strategy, Counter())[outcome] += 1
        opened, closed = row.get("opened_at"), row.get("closed_at")
        if outcome != "failed" and opened is not None and closed is not None:
            # Time to recovery: the fault's first report → training running again.
            key = str(histogram.bucket((closed - opened).total_seconds()))
            self.mttr.setdefault(strategy, Counter())[key] += 1

    # --- arithmetic -------------------------------------------------------------------------------
    def add(self, other: Tally, sign: int = 1) -> None:
        """``self += sign * other`` (sign -1: take ``other``'s incidents back out)."""
        self.faults += sign * other.faults
        self.detection_npu_s += sign * other.detection_npu_s
        self.decision_npu_s += sign * other.decision_npu_s
        self.recovery_npu_s += sign * other.recovery_npu_s
        self.rollbacks += sign * other.rollbacks
        self.rollback_npus += sign * other.rollback_npus
        _add_counter(self.by_kind, other.by_kind, sign)
        _add_counter(self.recoveries, other.recoveries, sign)
        _add_nested(self.by_strategy, other.by_strategy, sign)
        _add_nested(self.sources, other.sources, sign)
        _add_nested(self.mttr, other.mttr, sign)

    def minus(self, other: Tally) -> Tally:
        delta = Tally()
        delta.add(self)
        delta.add(other, -1)
        return delta

    @property
    def empty(self) -> bool:
        return self.faults == 0

    # --- rows -------------------------------------------------------------------------------------
    @classmethod
    def of_row(cls, row: Any) -> Tally:
        """From a model instance or a ``values()`` dict with the ``Figures`` fields."""
        values: Mapping[str, Any] = row if isinstance(row, Mapping) else {n: getattr(row, n) for n in FIELDS}
        tally = cls()
        tally.add_stored(values)
        return tally

    def add_stored(self, row: Mapping[str, Any]) -> None:
        """``self += `` a stored row's figures, read in place (the fleet view sums thousands of rows)."""
        self.faults += row["faults"]
        self.detection_npu_s += row["detection_npu_s"]
        self.decision_npu_s += row["decision_npu_s"]
        self.recovery_npu_s += row["recovery_npu_s"]
        self.rollbacks += row["rollbacks"]
        self.rollback_npus += row["rollback_npus"]
        _add_counter(self.by_kind, row["by_kind"] or {}, 1)
        _add_counter(self.recoveries, row["recoveries"] or {}, 1)
        _add_nested(self.by_strategy, row["by_strategy"] or {}, 1)
        _add_nested(self.sources, row["sources"] or {}, 1)
        _add_nested(self.mttr, row["mttr"] or {}, 1)

    def fields(self) -> dict[str, Any]:
        """The ``Figures`` columns (zero counts dropped, so equal tallies store equal JSON)."""
        return {
            "faults": self.faults,
            "detection_npu_s": self.detection_npu_s,
            "decision_npu_s": self.decision_npu_s,
            "recovery_npu_s": self.recovery_npu_s,
            "rollbacks": self.rollbacks,
            "rollback_npus": self.rollback_npus,
            "by_kind": _plain(self.by_kind),
            "recoveries": _plain(self.recoveries),
            "by_strategy": {k: _plain(v) for k, v in sorted(self.by_strategy.items()) if _plain(v)},
            "mttr": {k: _plain(v) for k, v in sorted(self.mttr.items()) if _plain(v)},
            "sources": {k: _plain(v) for k, v in sorted(self.sources.items()) if _plain(v)},
        }


def _plain(counter: Mapping[str, int]) -> dict[str, int]:
    return {k: int(v) for k, v in sorted(counter.items()) if v}


def _add_counter(mine: Counter[str], other: Mapping[str, int], sign: int) -> None:
    for key, value in other.items():
        mine[key] += sign * value


def _add_nested(mine: dict[str, Counter[str]], other: Mapping[str, Mapping[str, int]], sign: int) -> None:
    for key, counts in other.items():
        _add_counter(mine.setdefault(key, Counter()), counts, sign)

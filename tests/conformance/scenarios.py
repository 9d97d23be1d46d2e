"""The conformance table as typed scenarios: the rows live in ``scenarios.yaml`` (data, with the
MindCluster source lines each one cites and the corrections of the second reading marked where they
apply); this module reads them into ``Scenario`` values and refuses a malformed row by name.

What the keys mean is written at the top of the YAML file.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Final

import yaml

from mindcluster.clusterd import NO_REPORT

TABLE: Final = Path(__file__).with_name("scenarios.yaml")
ALL_WORDS: Final = ("retry", "recover", "dump", "downgrade")


@dataclass(frozen=True)
class Fault:
    pod: int  # pod rank (rank 0 = the rank-0 pod); the process rank is pod * 8
    type: str = "normal"  # uce / hccl / normal / node
    level: str | None = None  # None = the injector's default for the type


@dataclass(frozen=True)
class Outcome:
    """What ClusterD did with one event: expected by a scenario, observed by each runner."""

    strategies: tuple[str, ...] = ()  # the strategies chosen, in order
    statuses: tuple[str, ...] = ()  # the ProcessRecoverStatus values written
    codes: tuple[int, ...] = ()
    init: int = 0  # the Init code
    rescheduled: str | None = None  # job / pod / failed / None (training continues)
    # RestartFaultProcess of the fault list written to reset.json at the first globalFault: "true",
    # "false", or "none" (no list written there); None = the scenario does not check it.
    restart_fault_process: str | None = None


@dataclass(frozen=True)
class Scenario:
    id: str
    src: tuple[str, ...]  # repository paths with line ranges: component/...go:10-20
    strategies: str | None  # recover-strategy on the AscendJob; None = absent
    faults: tuple[Fault, ...]
    expected: Outcome
    labels: dict[str, str] = field(default_factory=dict)  # on the AscendJob (copied to the PodGroup)
    annotations: dict[str, str] = field(default_factory=dict)
    release: str = "26.1"
    fault_scheduling: str = "grace"  # grace / off
    live: dict[str, dict[str, str | None]] = field(default_factory=dict)  # PodGroup patch after Init
    agent: tuple[str, ...] = ALL_WORDS
    results: tuple[bool | int, ...] = (True,)  # per attempt; the last repeats
    platform: str | None = None  # platform mode: the standing and final answer; None = none (508)
    rank_table: str | None = "true"  # RankTableReady when platform mode answers recover
    spare: bool = True  # enough free resources for rescheduling
    framework: str = "pytorch"
    # The agent's ReportStopComplete after stopTrain: 0, 404 (ProcessNotReady) or no-report (silent).
    stop_complete: int = 0
    strategy_report: bool = True  # no-report: silent after globalFault (no ReportRecoverStrategy)
    regrow: bool = False  # after a scale-in success the fault pods' replacements run (scale-out)
    then: tuple[Fault, ...] = ()  # the faults of a second event, injected once the first is over

    @property
    def platform_mode(self) -> bool:
        return "ProcessRecoverStrategy" in self.annotations


class TableError(ValueError):
    """A row of ``scenarios.yaml`` that does not read: the message names the scenario and the key."""


_REQUIRED: Final = frozenset({"id", "src", "strategies", "faults", "expected"})
_KEYS: Final = frozenset(f.name for f in fields(Scenario))
_OUTCOME_KEYS: Final = frozenset(f.name for f in fields(Outcome))
_FAULT_KEYS: Final = frozenset(f.name for f in fields(Fault))
_TUPLES: Final = ("agent", "results")


def _keys(
    raw: Any, allowed: frozenset[str], where: str, required: frozenset[str] = frozenset()
) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise TableError(f"{where}: expected a mapping, got {raw!r}")
    if unknown := sorted(set(raw) - allowed):
        raise TableError(f"{where}: unknown key(s) {unknown}")
    if missing := sorted(required - set(raw)):
        raise TableError(f"{where}: missing key(s) {missing}")
    return raw


def _fault(raw: Any, named: dict[str, Fault], where: str) -> Fault:
    if isinstance(raw, str):
        if raw not in named:
            raise TableError(f"{where}: faults: {raw!r} is not one of {sorted(named)}")
        return named[raw]
    return Fault(**_keys(raw, _FAULT_KEYS, f"{where}: faults", frozenset({"pod"})))


def _cite(raw: Any, files: dict[str, str], where: str) -> str:
    """``controller.go:1096-1106`` → the file's repository path with the same lines."""
    name, sep, lines = str(raw).partition(":")
    if not sep or not lines or name not in files:
        raise TableError(f"{where}: src: {raw!r} is not FILE:LINES with FILE one of {sorted(files)}")
    return f"{files[name]}:{lines}"


def _scenario(raw: Any, files: dict[str, str], named: dict[str, Fault]) -> Scenario:
    where = f"scenario {raw.get('id', '?') if isinstance(raw, dict) else raw!r}"
    values = dict(_keys(raw, _KEYS, where, _REQUIRED))
    values["src"] = tuple(_cite(src, files, where) for src in values["src"])
    values["faults"] = tuple(_fault(fault, named, where) for fault in values["faults"])
    values["then"] = tuple(_fault(fault, named, where) for fault in values.get("then", ()))
    expected = dict(_keys(values["expected"], _OUTCOME_KEYS, f"{where}: expected"))
    if "restart_fault_process" in expected:
        value = expected["restart_fault_process"]
        if value not in (True, False, "none"):
            raise TableError(f"{where}: expected: restart_fault_process: true, false or none, not {value!r}")
        expected["restart_fault_process"] = {True: "true", False: "false"}.get(value, "none")
    outcome: dict[str, Any] = {
        key: tuple(value) if isinstance(value, list) else value for key, value in expected.items()
    }
    values["expected"] = Outcome(**outcome)
    values.update({key: tuple(values[key]) for key in _TUPLES if key in values})
    if "results" in values:  # the agent's silence is written as a word, not as the engine's -1
        values["results"] = tuple(NO_REPORT if r == "no-report" else r for r in values["results"])
    if values.get("stop_complete") == "no-report":
        values["stop_complete"] = NO_REPORT
    if "strategy_report" in values:
        if values["strategy_report"] != "no-report":
            raise TableError(f"{where}: strategy_report: only no-report is meaningful")
        values["strategy_report"] = False
    return Scenario(**values)


def load(path: Path = TABLE) -> list[Scenario]:
    table = _keys(yaml.safe_load(path.read_text()), frozenset({"files", "faults", "scenarios"}), path.name)
    named = {name: _fault(raw, {}, f"{path.name}: faults.{name}") for name, raw in table["faults"].items()}
    return [_scenario(raw, table["files"], named) for raw in table["scenarios"]]


SCENARIOS: Final = load()


def sources() -> list[str]:
    """Every cited source line range, once, sorted."""
    return sorted({src for scenario in SCENARIOS for src in scenario.src})

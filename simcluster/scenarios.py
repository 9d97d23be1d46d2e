"""Scripted fault scenarios in YAML, run against the simulated clock.

::

    faults:
      - {at_s: 0,  job: default/llama-pt, rank: 3, type: uce, recovers: [false, true]}
      - {at_s: 90, job: default/ms-job,   rank: 0, type: node}

``at_s`` is simulated seconds from the start of the run. A scenario may first build a fleet
(``simcluster/fleet.py``), then its faults (if any) run against it::

    fleet: {nodes: 1000, npus_per_node: 8, jobs: 200}
    faults:
      - {at_s: 5, job: fleet/fleet-0007, rank: 1, type: uce}

``parse_scenario`` never raises anything but ``ScenarioError``, whose message names the offending
entry and field.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from simcluster.clock import SimClock
from simcluster.fleet import FleetSpec, FleetSpecError, parse_fleet
from simcluster.injector import FaultSpec, FaultSpecError, UnknownJobError, parse_fault

log = logging.getLogger(__name__)
MAX_SCENARIO_FAULTS = 1000


class ScenarioError(ValueError):
    """A scenario that cannot be run; the message says where and why."""


@dataclass(frozen=True)
class ScheduledFault:
    at_s: float
    spec: FaultSpec


@dataclass(frozen=True)
class Scenario:
    faults: tuple[ScheduledFault, ...]
    fleet: FleetSpec | None = None


def parse_scenario(source: str | bytes | Any) -> Scenario:
    """Parse a YAML text (or an already-loaded mapping) into a ``Scenario``."""
    if isinstance(source, bytes | str):
        try:
            data = yaml.safe_load(source)
        except yaml.YAMLError as exc:
            raise ScenarioError(f"not valid YAML: {exc}") from None
    else:
        data = source
    if not isinstance(data, dict):
        raise ScenarioError(f"a scenario must be a mapping with a 'faults' list, got {type(data).__name__}")
    unknown = sorted(set(map(str, data)) - {"faults", "fleet"})
    if unknown:
        raise ScenarioError(f"unknown top-level key(s) {unknown}; only 'faults' and 'fleet' are allowed")
    fleet = None
    if "fleet" in data:
        try:
            fleet = parse_fleet(data["fleet"])
        except FleetSpecError as exc:
            raise ScenarioError(str(exc)) from None
    entries = data.get("faults", [] if fleet is not None else None)
    if not isinstance(entries, list) or (not entries and fleet is None):
        raise ScenarioError("'faults' must be a non-empty list")
    if len(entries) > MAX_SCENARIO_FAULTS:
        raise ScenarioError(f"at most {MAX_SCENARIO_FAULTS} faults per scenario, got {len(entries)}")
    faults = []
    for index, entry in enumerate(entries):
        where = f"faults[{index}]"
        if not isinstance(entry, dict):
            raise ScenarioError(f"{where}: expected a mapping, got {type(entry).__name__}")
        at_s = entry.get("at_s", 0)
        if isinstance(at_s, bool) or not isinstance(at_s, int | float) or at_s < 0 or at_s != at_s:
            raise ScenarioError(f"{where}.at_s: expected a number of seconds >= 0, got {at_s!r}")
        try:
            spec = parse_fault(entry)
        except FaultSpecError as exc:
            raise ScenarioError(f"{where}.{exc}") from None
        faults.append(ScheduledFault(float(at_s), spec))
    return Scenario(tuple(sorted(faults, key=lambda f: f.at_s)), fleet)


@dataclass
class ScenarioRun:
    """A running scenario: injected fault ids and errors, filled in as it goes."""

    id: str
    injected: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)


def run_scenario(
    scenario: Scenario,
    clock: SimClock,
    inject: Callable[[FaultSpec], str],
    run: ScenarioRun,
    stop: threading.Event,
    create_fleet: Callable[[FleetSpec], Any] | None = None,
) -> None:
    """Build the scenario's fleet (if any), then inject each fault at its simulated time, counted
    from when the fleet runs (blocking; call it in a thread)."""
    try:
        if scenario.fleet is not None:
            if create_fleet is None:
                run.errors.append("this cluster cannot build a fleet")
                return
            try:
                create_fleet(scenario.fleet)
            except (TimeoutError, ValueError) as exc:
                run.errors.append(f"fleet: {exc}")
                log.warning("scenario %s: fleet: %s", run.id, exc)
                return
        start = clock.monotonic()
        for item in scenario.faults:
            wait = item.at_s - (clock.monotonic() - start)
            if wait > 0 and not clock.sleep(wait, stop):
                return
            try:
                run.injected.append(inject(item.spec))
            except (UnknownJobError, FaultSpecError) as exc:
                run.errors.append(str(exc))
                log.warning("scenario %s: %s", run.id, exc)
    finally:
        run.done.set()

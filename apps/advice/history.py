"""A job's fault history as the cost model needs it: incidents folded into fault classes, and the
measured step durations.

Two incidents are in the same class when the what-if model cannot tell them apart: same fault type and
handling level, the same shape of faulty pods (is the rank-0 pod among them, one pod or more), and the
same known outcome per strategy. Replaying one fault per class (times its count) gives the same total
as replaying every incident, which keeps 1,000 incidents x every candidate cheap.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from apps.advice.assumptions import ATTEMPT_NAMES, PRIORS, RESCHEDULE_NAMES, Assumption, measured
from apps.decisions.whatif import FaultSpec
from apps.policies.spec import FAULT_TYPES

_OUTCOME_OK = {"succeeded": True, "saved": True, "failed": False}
_PSEUDO = frozenset({"exit", "pod-rescheduling", "job-rescheduling"})


@dataclass(frozen=True)
class FaultClass:
    fault: FaultSpec  # canonical ranks: pod 0 stays 0, other faulty pods become 1, 2, ...
    pods_needed: int

    @property
    def kind(self) -> str:
        return self.fault.fault_type


@dataclass
class History:
    classes: Counter[FaultClass] = field(default_factory=Counter)
    faults: int = 0
    unknown_ranks: int = 0
    samples: dict[str, list[int]] = field(default_factory=dict)


def fault_type(fault: dict[str, Any]) -> str:
    for kind in fault.get("types") or []:
        if kind in FAULT_TYPES:
            return str(kind)
    return "normal"


def _outcomes(strategies: list[str], attempts: list[dict[str, Any]]) -> tuple[tuple[str, bool], ...]:
    """How each process strategy the incident tried went. Attempts carry ClusterD's status word (which
    says ``recover`` for recover-in-place), so they are paired in order with the chosen names."""
    chosen = [s for s in strategies if s not in _PSEUDO]
    results = [a for a in attempts if a.get("outcome") in _OUTCOME_OK]
    return tuple(
        sorted({name: _OUTCOME_OK[a["outcome"]] for name, a in zip(chosen, results, strict=False)}.items())
    )


def _canonical_ranks(ranks: list[int], npus_per_pod: int) -> tuple[tuple[int, ...], bool]:
    if not ranks:
        return (npus_per_pod,), True  # unknown: assume one faulty pod that is not the rank-0 pod
    pods = {int(r) // npus_per_pod for r in ranks}
    # The engine asks only "is the rank-0 pod faulty" and "is more than one pod faulty"
    # (engine.in_place_condition, can_scale_in, outer_rescheduling): two pods stand for any number.
    others = min(len(pods - {0}), 1 if 0 in pods else 2)
    canonical = ([0] if 0 in pods else []) + list(range(1, others + 1))
    return tuple(p * npus_per_pod for p in canonical), False


def fault_history(incidents: Iterable[dict[str, Any]], npus_per_pod: int) -> History:
    """Fold incident rows (``Incident`` values) into classes and duration samples."""
    history = History()
    samples: dict[str, list[int]] = {name: [] for name in PRIORS}
    for row in incidents:
        fault = row.get("fault") or {}
        ranks, unknown = _canonical_ranks(list(row.get("ranks") or []), npus_per_pod)
        levels = [str(level) for level in fault.get("levels") or [] if level]
        strategies = [str(s) for s in row.get("strategies") or []]
        spec = FaultSpec(
            fault_type=fault_type(fault),
            ranks=ranks,
            level=levels[0] if levels else "",
            outcome_by_strategy=_outcomes(strategies, list(row.get("attempts") or [])),
        )
        history.classes[FaultClass(spec, pods_needed=max(ranks) // npus_per_pod + 1)] += 1
        history.faults += 1
        history.unknown_ranks += unknown
        _sample(samples, row, strategies)
    history.samples = samples
    return history


def _sample(samples: dict[str, list[int]], row: dict[str, Any], strategies: list[str]) -> None:
    if row.get("detect_ms") is not None:
        samples["detect_s"].append(row["detect_ms"])
    if row.get("decide_ms") is not None:
        samples["decide_s"].append(row["decide_ms"])
    recover_ms = row.get("recover_ms")
    if recover_ms is None:
        return
    # One strategy that worked: first strategy → running again is that strategy's duration.
    if row.get("outcome") == "recovered" and len(strategies) == 1 and strategies[0] in ATTEMPT_NAMES:
        samples[ATTEMPT_NAMES[strategies[0]]].append(recover_ms)
    # Straight to rescheduling (after exit or with process recovery off).
    if row.get("outcome") == "rescheduled" and [s for s in strategies if s != "exit"] in (
        ["job-rescheduling"],
        ["pod-rescheduling"],
    ):
        samples[RESCHEDULE_NAMES[strategies[-1]]].append(recover_ms)


_WHAT = {
    "detect_s": "fault → training stopped",
    "decide_s": "training stopped → strategy chosen",
    "retry_s": "retry alone, chosen → running",
    "recover_in_place_s": "recover-in-place alone, chosen → running",
    "recover_s": "recover alone, chosen → running",
    "elastic_training_s": "elastic-training alone, chosen → running",
    "dump_s": "dump alone",
    "exit_s": "exit",
    "job_reschedule_s": "straight to Job-level rescheduling, chosen → running (exit included)",
    "pod_reschedule_s": "straight to Pod-level rescheduling, chosen → running (exit included)",
}


def step_durations(history: History) -> dict[str, Assumption]:
    """Each step's duration: measured on this job's incidents where there are enough, else the prior."""
    out = {}
    for name, prior in PRIORS.items():
        if name in _WHAT and name not in ("dump_s", "exit_s"):  # dump and exit are never alone in an incident
            out[name] = measured(name, history.samples.get(name, []), prior, _WHAT[name])
        else:
            out[name] = prior
    return out

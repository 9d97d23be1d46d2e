"""What one closed incident cost in NPU time, by component: the advice's cost model (design §4.7)
applied to what really happened instead of to a replay.

The strategy advice prices a fault as (detect + decide + the steps of ClusterD's path) x the job's
NPUs, plus half a checkpoint period x NPUs when the path restarts training from the last checkpoint
(``apps.advice.replay.path_of``: after Pod- or Job-level rescheduling, unless a dump was saved first).
The fleet view (design §4.8) sums the same four components over the incidents that happened: each
duration is the incident's measured one where it has it (source ``measured``), else the advice's
prior for that step (``apps.advice.assumptions.PRIORS``: ``published`` or ``model``), so the two
views can never disagree about what a fault costs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from apps.advice.assumptions import ATTEMPT_NAMES, PRIORS, RESCHEDULE_NAMES

DEFAULT_NPUS_PER_POD: Final = 8
# The components of a fault's lost time, in the order the fleet view shows them.
COMPONENTS: Final = ("detection", "decision", "recovery", "rollback")
_STEP_PRIORS: Final = {**ATTEMPT_NAMES, **RESCHEDULE_NAMES}


def job_npus(npus_per_pod: int, replicas: Mapping[str, Any] | None) -> int:
    """The NPUs a job holds, from its stored row: pods (replicas over every role, at least one) x NPUs per
    pod (the advice's 8 when the job's pods have not been seen yet). THE one owner of this figure."""
    pods = max(1, sum(int(v) for v in (replicas or {}).values()))
    return pods * (npus_per_pod or DEFAULT_NPUS_PER_POD)


@dataclass(frozen=True)
class IncidentLoss:
    """Seconds of training time one incident stopped, per component, and where each figure comes from."""

    detection_s: float
    decision_s: float
    recovery_s: float
    rollback: bool  # training restarted from the last checkpoint: half a checkpoint period is lost
    sources: dict[str, str]  # component -> measured | published | model

    @property
    def stopped_s(self) -> float:
        return self.detection_s + self.decision_s + self.recovery_s


def _measured_or(ms: int | None, prior: float, prior_source: str) -> tuple[float, str]:
    if ms is None:
        return prior, prior_source
    return ms / 1000, "measured"


def _recovery_prior(strategies: list[str]) -> tuple[float, str]:
    """The priced steps of the strategies the incident tried (``Path.seconds``' sum), unmeasured."""
    names = [_STEP_PRIORS[s] for s in strategies if s in _STEP_PRIORS]
    if not names:
        return PRIORS["exit_s"].value, PRIORS["exit_s"].source
    sources = {PRIORS[n].source for n in names}
    return sum(PRIORS[n].value for n in names), "published" if sources == {"published"} else "model"


def restarts_from_checkpoint(strategies: list[str], attempts: list[dict[str, Any]]) -> bool:
    """``path_of``'s rule on a real incident: rescheduled (Pod or Job level) and no dump saved first."""
    rescheduled = any(s in RESCHEDULE_NAMES for s in strategies) or any(
        a.get("outcome") == "rescheduled" for a in attempts
    )
    dump_saved = any(a.get("outcome") == "saved" for a in attempts)
    return rescheduled and not dump_saved


def incident_loss(row: Mapping[str, Any]) -> IncidentLoss:
    """Price one closed incident (``Incident`` values: strategies, attempts, detect/decide/recover_ms)."""
    strategies = [str(s) for s in row.get("strategies") or []]
    detect = _measured_or(row.get("detect_ms"), PRIORS["detect_s"].value, PRIORS["detect_s"].source)
    decide = _measured_or(row.get("decide_ms"), PRIORS["decide_s"].value, PRIORS["decide_s"].source)
    recover = _measured_or(row.get("recover_ms"), *_recovery_prior(strategies))
    rollback = restarts_from_checkpoint(strategies, list(row.get("attempts") or []))
    return IncidentLoss(
        detection_s=detect[0],
        decision_s=decide[0],
        recovery_s=recover[0],
        rollback=rollback,
        sources={
            "detection": detect[1],
            "decision": decide[1],
            "recovery": recover[1],
            "rollback": "default",  # half of the checkpoint period, a parameter of the view
        },
    )


def rollback_seconds(checkpoint_period_s: float) -> float:
    """A restart from the last checkpoint loses half a checkpoint period on average
    (``reference/mindcluster.md`` §7.3), as ``apps.advice.services._Pricing`` counts it."""
    return checkpoint_period_s / 2

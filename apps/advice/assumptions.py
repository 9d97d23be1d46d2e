"""Step durations the cost model adds up, each with a range and where it comes from.

Sources: ``measured`` (this cluster's incidents, when there are at least ``MIN_SAMPLES``),
``published`` (MindCluster's published figures, ``reference/mindcluster-source-facts.md`` §7, each
with the ``path:line`` of the doc in Ascend/mind-cluster in ``reference``, or a constant in its
source), ``model`` (no figure is published: the simulator's nominal duration,
``mindcluster.clusterd.PHASE_SECONDS``, within x0.5-x2), ``user`` (a query parameter) and
``default`` (a parameter the user did not give).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from mindcluster import clusterd as engine

# Fewer incidents than this on a path and its duration stays published/model: a median of 5 is the
# smallest sample whose 10th-90th percentile range still excludes a single outlier on each side.
MIN_SAMPLES: Final = 5
DEFAULT_CHECKPOINT_PERIOD_S: Final = 3600
DEFAULT_WINDOW_DAYS: Final = 28
CHECKPOINT_PERIOD_BOUNDS: Final = (60, 7 * 86_400)
WINDOW_DAYS_BOUNDS: Final = (1, 365)

# The process-level strategies whose attempt durations are looked up by name.
ATTEMPT_NAMES: Final = {
    "retry": "retry_s",
    "recover-in-place": "recover_in_place_s",
    "recover": "recover_s",
    "elastic-training": "elastic_training_s",
    "dump": "dump_s",
}
RESCHEDULE_NAMES: Final = {"pod-rescheduling": "pod_reschedule_s", "job-rescheduling": "job_reschedule_s"}

# mindcluster-source-facts.md §7: the only published recovery timings (Ascend/mind-cluster, docs from
# v26.0.0; the English twin is 00_feature_description.md:128-131).
PUBLISHED_TIMINGS: Final = (
    "docs/zh/scheduling/04_usage/04_resumable_training/00_feature_description.md:130-133"
)
_SECTION = f"{PUBLISHED_TIMINGS}, PyTorch GPT-3 3B / 15B on one 8-NPU node, rescheduling mode"


@dataclass(frozen=True)
class Assumption:
    name: str
    value: float
    low: float
    high: float
    source: str  # measured | published | model | user | default
    note: str
    unit: str = "s"
    samples: int | None = None
    reference: str | None = None  # published: the doc's path:line; else the source constant's

    def as_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            # A model or published duration gives way to this cluster's own once there are this many.
            "measured_from": MIN_SAMPLES if self.source in ("model", "published") else None,
            "name": self.name,
            "value": self.value,
            "range": [self.low, self.high],
            "unit": self.unit,
            "source": self.source,
            "samples": self.samples,
            "note": self.note,
        }


def _model(name: str, phase: str, what: str) -> Assumption:
    nominal = engine.PHASE_SECONDS[phase]
    return Assumption(
        name,
        nominal,
        nominal / 2,
        nominal * 2,
        "model",
        f"{what}: MindCluster publishes no figure (it says only that process-level recovery is weakly tied "
        "to scale and retry is fastest); the simulator's nominal duration, x0.5-x2, until "
        f"{MIN_SAMPLES} incidents are measured",
    )


# Rescheduling = device handling (<30 s) + training restart (≈70 s for 3B, ≈210 s for 15B, checkpoint
# load included); the point is the middle of 70-240 s.
_RESCHEDULE_NOTE = (
    "device handling <30 s + training restart ≈70 s (3B) to ≈210 s (15B), checkpoint load included "
    f"({_SECTION})"
)
PRIORS: Final[dict[str, Assumption]] = {
    a.name: a
    for a in (
        Assumption(
            "detect_s",
            5.0,
            0.0,
            5.0,
            "published",
            f"fault detection <5 s ({_SECTION})",
            reference=PUBLISHED_TIMINGS,
        ),
        Assumption(
            "decide_s",
            0.0,
            0.0,
            0.0,
            "model",
            "ClusterD chooses the strategy as soon as training stops (no figure published); in platform "
            "mode the answer's wait is measured once there are incidents",
        ),
        _model("retry_s", "retry", "step-level retry"),
        _model("recover_in_place_s", "recover-in-place", "restart of the faulty processes in place"),
        _model("recover_s", "recover", "process-level rescheduling (recover)"),
        _model("elastic_training_s", "elastic-training", "scale-in (elastic-training)"),
        _model("dump_s", "dump", "saving the dump checkpoint"),
        _model("exit_s", "exit", "stopping the training processes"),
        Assumption(
            "job_reschedule_s",
            155.0,
            70.0,
            240.0,
            "published",
            f"Job-level: {_RESCHEDULE_NOTE}",
            reference=PUBLISHED_TIMINGS,
        ),
        Assumption(
            "pod_reschedule_s",
            155.0,
            70.0,
            240.0,
            "published",
            f"Pod-level: the same figures; the docs say it saves scheduling time but not initialisation "
            f"and publish no separate number ({_SECTION})",
            reference=PUBLISHED_TIMINGS,
        ),
        Assumption(
            "platform_wait_s",
            300.0,
            300.0,
            300.0,
            "published",
            "no standing platform answer: ClusterD waits 300 s, then code 508 "
            f"({engine.SRC['platform-wait']})",
            reference="component/clusterd/pkg/common/constant/const.go:159-161",
        ),
    )
}


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def measured(name: str, samples_ms: Iterable[int], prior: Assumption, what: str) -> Assumption:
    """The median and 10th-90th percentile of ``samples_ms`` when there are enough, else ``prior``."""
    values = sorted(v / 1000 for v in samples_ms)
    if len(values) < MIN_SAMPLES:
        if not values:
            return prior
        return Assumption(
            prior.name,
            prior.value,
            prior.low,
            prior.high,
            prior.source,
            f"{prior.note}; only {len(values)} measured (fewer than {MIN_SAMPLES})",
            samples=len(values),
            reference=prior.reference,
        )
    return Assumption(
        name,
        round(percentile(values, 0.5), 3),
        round(percentile(values, 0.1), 3),
        round(percentile(values, 0.9), 3),
        "measured",
        f"median (10th-90th percentile) of {len(values)} incidents of this job: {what}",
        samples=len(values),
    )


def parameter(name: str, given: int | None, default: int, unit: str, note: str) -> Assumption:
    value = float(default if given is None else given)
    return Assumption(name, value, value, value, "default" if given is None else "user", note, unit=unit)

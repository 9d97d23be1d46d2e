"""Strategy advice for one job (design.md §4.7): expected lost NPU-hours per week under the policy in
effect and under every valid candidate, from the job's own faults.

Per fault: (detect + decide + the priced steps of ClusterD's path) x the job's NPUs, plus half a
checkpoint period x NPUs when the path restarts training from the last checkpoint. Summed over the
window and scaled to a week. The range uses every step duration at its low and its high end.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, F, Max, Min, OuterRef, Q, Subquery
from django.utils import timezone

from apps.advice import assumptions as A
from apps.advice.candidates import Candidate, valid_candidates
from apps.advice.history import FaultClass, History, fault_history, step_durations
from apps.advice.lost import DEFAULT_NPUS_PER_POD, job_npus, rollback_seconds
from apps.advice.models import AdviceSummary
from apps.advice.replay import EngineKey, Path, engine_key, replay
from apps.decisions import whatif
from apps.events.models import Incident
from apps.jobs.models import TrainingJob
from apps.policies.in_effect import in_effect as in_effect_view
from apps.policies.models import PolicyRevision
from apps.policies.spec import PolicySpec
from apps.policies.validation import validate_policy
from mindcluster import clusterd as engine
from mindcluster import keys as c

_INCIDENT_FIELDS = (
    "opened_at",
    "outcome",
    "fault",
    "ranks",
    "strategies",
    "attempts",
    "detect_ms",
    "decide_ms",
    "recover_ms",
)


# --- the policy in effect ---------------------------------------------------------------------------
@dataclass(frozen=True)
class InEffect:
    """The recovery config the cluster runs the job with, and where that knowledge comes from."""

    source: str  # in-effect | observed-config | current-revision | default
    spec: PolicySpec  # the revision's spec (for the platform's rules; the defaults when none)
    revision: int | None = None
    snapshot: engine.RecoveryPolicy | None = None  # ClusterD's Init snapshot, when known


def current_config(job: TrainingJob) -> InEffect:
    """THE one place that says which policy is in effect for ``job``: the in-effect view of design
    §4.4 (``apps.policies.in_effect``), i.e. the config the cluster actually runs with (ClusterD's
    Init snapshot, else the PodGroup as created), not the revision we last wrote.

    Without any observation of the job yet, the current revision stands in (source
    ``current-revision``), else the defaults.
    """
    view = in_effect_view(job)
    snapshot = _snapshot_of(view.get("config"))
    if view.get("revision") is not None:
        revision = PolicyRevision.objects.get(job=job, number=view["revision"])
        return InEffect("in-effect", _spec(revision.spec, job), revision.number, snapshot)
    current = job.current_revision  # no query when the job has no revision
    base = (
        _spec(current.spec, job)
        if current is not None
        else PolicySpec(mindcluster_version=job.mindcluster_version)
    )
    if snapshot is not None:  # observed, but no revision of ours matches it (e.g. set by hand)
        return InEffect("observed-config", base, None, snapshot)
    if current is not None:
        return InEffect("current-revision", base, current.number)
    return InEffect("default", base)


def _snapshot_of(config: dict[str, Any] | None) -> engine.RecoveryPolicy | None:
    """The engine's view of an observed creation config (the keys ClusterD snapshots at Init)."""
    if not config:
        return None
    labels = {
        key: str(config[key])
        for key in (
            c.LABEL_FAULT_SCHEDULING,
            c.LABEL_POD_RESCHEDULING,
            c.LABEL_SUB_HEALTHY_STRATEGY,
            c.LABEL_PROCESS_RECOVER_ENABLE,
        )
        if config.get(key)
    }
    annotations = {c.ANNOTATION_RECOVER_STRATEGY: str(config.get(c.ANNOTATION_RECOVER_STRATEGY) or "")}
    if config.get("platform_mode"):
        annotations[c.ANNOTATION_PLATFORM_STRATEGY] = ""
    return engine.RecoveryPolicy.from_podgroup(labels, annotations)


def _spec(raw: dict[str, Any], job: TrainingJob) -> PolicySpec:
    result = validate_policy(raw)
    return result.spec or PolicySpec(mindcluster_version=job.mindcluster_version)


# --- advice -----------------------------------------------------------------------------------------
@dataclass
class _Figure:
    """One policy's cost over the history."""

    paths: dict[FaultClass, Path]
    point: float | None
    low: float | None
    high: float | None
    per_kind: dict[str, dict[str, Any]]
    why: str

    @property
    def fails(self) -> bool:
        return any(p.fails for p in self.paths.values())


class _Pricing:
    def __init__(
        self, history: History, durations: dict[str, A.Assumption], npus: int, period: float, days: float
    ):
        self.history = history
        self.durations = durations
        self.scale = npus / 3600 * 7 / days  # NPU-seconds over the window → NPU-hours per week
        self.rollback_s = rollback_seconds(period)

    def figure(self, paths: dict[FaultClass, Path]) -> _Figure:
        totals = {"value": 0.0, "low": 0.0, "high": 0.0}
        per_kind: dict[str, dict[str, Any]] = {}
        labels: dict[str, Counter[str]] = defaultdict(Counter)
        for fault, count in self.history.classes.items():
            path = paths[fault]
            kind = per_kind.setdefault(
                fault.kind, {"faults": 0, "expected_lost_npu_hours_per_week": 0.0, "paths": {}}
            )
            kind["faults"] += count
            kind["paths"][path.label] = kind["paths"].get(path.label, 0) + count
            labels[fault.kind][path.label] += count
            rollback = self.rollback_s if path.rollback else 0.0
            for which in totals:
                seconds = count * (path.seconds(self.durations, which) + rollback)
                totals[which] += seconds
                if which == "value":
                    kind["expected_lost_npu_hours_per_week"] += seconds * self.scale
        fails = any(p.fails for p in paths.values())
        for kind in per_kind.values():
            kind["expected_lost_npu_hours_per_week"] = (
                None if fails else round(kind["expected_lost_npu_hours_per_week"], 3)
            )
        why = self._why(labels, paths)
        if fails:
            return _Figure(paths, None, None, None, per_kind, why)
        return _Figure(
            paths,
            round(totals["value"] * self.scale, 3),
            round(totals["low"] * self.scale, 3),
            round(totals["high"] * self.scale, 3),
            per_kind,
            why,
        )

    def _why(self, labels: dict[str, Counter[str]], paths: dict[FaultClass, Path]) -> str:
        if not labels:
            return "No faults in the window, so every policy loses nothing so far."
        parts = []
        for kind, counter in sorted(labels.items(), key=lambda item: -sum(item[1].values())):
            label, count = counter.most_common(1)[0]
            path = next(p for f, p in paths.items() if f.kind == kind and p.label == label)
            cost = round(path.seconds(self.durations))
            tail = (
                " (the job stops for good)"
                if path.fails
                else (
                    f", ≈{cost} s + {round(self.rollback_s)} s rollback each"
                    if path.rollback
                    else f", ≈{cost} s each, no rollback"
                )
            )
            more = f" ({count} of {sum(counter.values())})" if len(counter) > 1 else ""
            parts.append(f"{kind.upper()} faults{more} end in {label}{tail}")
        return "; ".join(parts) + "."


def _parse_ints(
    checkpoint_period_s: int | None, window_days: int | None
) -> tuple[A.Assumption, A.Assumption]:
    period = A.parameter(
        "checkpoint_period_s",
        checkpoint_period_s,
        A.DEFAULT_CHECKPOINT_PERIOD_S,
        "s",
        "time between checkpoints; a restart from the last one loses half of it on average "
        "(reference/mindcluster.md §7.3); set ?checkpoint_period_s= to your job's",
    )
    window = A.parameter(
        "window_days", window_days, A.DEFAULT_WINDOW_DAYS, "days", "how far back faults are read"
    )
    return period, window


# Folded fault histories by (job, NPUs per pod, fingerprint of the incidents in the window): reading
# and decoding a thousand incident rows is most of an advice call, and the rows rarely change.
_HISTORY_CACHE: dict[tuple[Any, ...], tuple[History, datetime | None]] = {}
_HISTORY_CACHE_SIZE = 256


def _window_history(
    job: TrainingJob, window_start: datetime, npus_per_pod: int
) -> tuple[History, datetime | None]:
    """The job's incidents in the window folded into fault classes, and the first one's time.

    One aggregate query fingerprints the window (count, first opened, newest change); only when it
    differs from the cached one are the rows read again. ``History`` is never mutated after folding.
    """
    window = Incident.objects.filter(job=job, opened_at__gte=window_start)
    stamp = window.aggregate(n=Count("id"), first=Min("opened_at"), changed=Max("updated_at"))
    key = (job.pk, npus_per_pod, stamp["n"], stamp["first"], stamp["changed"])
    cached = _HISTORY_CACHE.get(key)
    if cached is not None:
        return cached
    rows = window.order_by("opened_at").values(*_INCIDENT_FIELDS)
    folded = (fault_history(rows, npus_per_pod), stamp["first"])
    if len(_HISTORY_CACHE) >= _HISTORY_CACHE_SIZE:
        _HISTORY_CACHE.pop(next(iter(_HISTORY_CACHE)))
    _HISTORY_CACHE[key] = folded
    return folded


def advise(
    job: TrainingJob,
    *,
    checkpoint_period_s: int | None = None,
    window_days: int | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The advice body of ``GET /api/v1/jobs/{id}/advice/`` (inputs already validated)."""
    now = now or timezone.now()
    period, window = _parse_ints(checkpoint_period_s, window_days)
    window_start = now - timedelta(days=window.value)
    npus_per_pod = job.npus_per_pod or DEFAULT_NPUS_PER_POD
    pods = max(1, job.node_nums)
    npus = job_npus(job.npus_per_pod, job.replicas)
    history, first_opened = _window_history(job, window_start, npus_per_pod)
    durations = step_durations(history)
    # Faults per week need an observed span: from the window start, or from when the job (or its
    # first fault in the window) appeared if later; at least a day, so a minutes-old job is not
    # extrapolated from one fault.
    first = min([job.created_at, *([first_opened] if first_opened else [])])
    since = max(window_start, first)
    days = max(1.0, (now - since).total_seconds() / 86_400)
    pricing = _Pricing(history, durations, npus, period.value, days)
    in_effect = current_config(job)
    scenario = whatif.Scenario(
        faults=[],
        npus_per_pod=npus_per_pod,
        pods=max([pods, *(f.pods_needed for f in history.classes)]),
        framework=job.framework,
        # The job's release decides paths (v26 preExitProcess, the v7.3 level filter).
        release=job.mindcluster_version,
    )

    if in_effect.snapshot is not None:
        current_key = (in_effect.snapshot, frozenset(in_effect.snapshot.process_strategies))
    else:
        current_key = engine_key(in_effect.spec, job.framework)
    current_paths = {f: replay(*current_key, f, scenario, in_effect.spec) for f in history.classes}
    current = pricing.figure(current_paths)

    # Candidates are priced as if the job were created with them (creation-time snapshot).
    base = PolicySpec(mindcluster_version=job.mindcluster_version)
    if job.current_revision is not None:
        base = _spec(job.current_revision.spec, job)
    groups: dict[EngineKey, list[Candidate]] = defaultdict(list)
    for candidate in valid_candidates(base, job):
        groups[candidate.key].append(candidate)
    by_behaviour: dict[tuple[Any, ...], tuple[dict[FaultClass, Path], list[Candidate]]] = {}
    order = sorted(history.classes, key=repr)  # one fixed order of classes for every signature
    for key, members in groups.items():
        paths = {f: replay(*key, f, scenario, base) for f in order}
        signature = tuple(paths[f] for f in order)
        if signature in by_behaviour:
            by_behaviour[signature][1].extend(members)
        else:
            by_behaviour[signature] = (paths, list(members))

    current_varied = _varied(in_effect.spec)
    current_signature = tuple(current_paths[f] for f in order)
    candidates: list[dict[str, Any]] = []
    for signature, (paths, members) in by_behaviour.items():
        figure = pricing.figure(paths)
        chosen = min(
            members, key=lambda c: (_distance(c, current_varied), len(c.spec.strategies), repr(c.varied))
        )
        candidates.append(
            {
                "spec": chosen.varied,
                "policy": chosen.spec.to_dict(),
                "expected_lost_npu_hours_per_week": figure.point,
                "range": None if figure.point is None else [figure.low, figure.high],
                "saves_vs_current": _saves(current.point, figure.point),
                "job_fails": figure.fails,
                "same_as_current": signature == current_signature,
                "equivalent_policies": len(members),
                "equivalents": [m.varied for m in members if m is not chosen],
                "per_fault_kind": figure.per_kind,
                "why": figure.why,
                "warnings": list(chosen.warnings),
            }
        )
    candidates.sort(
        key=lambda c: (
            c["expected_lost_npu_hours_per_week"] is None,
            c["expected_lost_npu_hours_per_week"] or 0.0,
            not c["same_as_current"],
            len(c["spec"]["strategies"]),
        )
    )
    assumption_list = [period.as_dict(), window.as_dict()]
    assumption_list += [durations[name].as_dict() for name in A.PRIORS]
    assumption_list += _fixed_assumptions(history)
    return {
        "job": job.pk,
        "npus": npus,
        "current": {
            "spec": current_varied,
            "policy": in_effect.spec.to_dict(),
            "in_effect": {"source": in_effect.source, "revision": in_effect.revision},
            "expected_lost_npu_hours_per_week": current.point,
            "range": None if current.point is None else [current.low, current.high],
            "job_fails": current.fails,
            "per_fault_kind": current.per_kind,
            "why": current.why,
        },
        "candidates": candidates,
        "assumptions": assumption_list,
        "history": {
            "faults": history.faults,
            "since": since.isoformat(),
            "days": round(days, 3),
            "fault_classes": len(history.classes),
            "min_samples_for_measured": A.MIN_SAMPLES,
        },
    }


def _fixed_assumptions(history: History) -> list[dict[str, Any]]:
    out = [
        {
            "name": "untried_strategies_work",
            "value": True,
            "range": None,
            "unit": None,
            "source": "model",
            "samples": None,
            "note": "a strategy this job never tried is assumed to succeed when ClusterD can choose it; "
            "one that failed in an incident fails again when that fault is replayed",
        },
        {
            "name": "fresh_restart_budget",
            "value": True,
            "range": None,
            "unit": None,
            "source": "model",
            "samples": None,
            "note": "each fault is replayed on its own with the restart budget not exhausted",
        },
    ]
    if history.unknown_ranks:
        out.append(
            {
                "name": "unknown_ranks",
                "value": history.unknown_ranks,
                "range": None,
                "unit": "faults",
                "source": "model",
                "samples": None,
                "note": "faults without a known rank are replayed on one pod that is not the rank-0 pod",
            }
        )
    return out


def _varied(spec: PolicySpec) -> dict[str, Any]:
    return {
        "strategies": list(spec.to_dict()["strategies"]),
        "fault_scheduling": spec.fault_scheduling,
        "pod_rescheduling": spec.pod_rescheduling,
    }


def _distance(candidate: Candidate, current: dict[str, Any]) -> int:
    varied = candidate.varied
    return (
        len(set(varied["strategies"]) ^ set(current["strategies"]))
        + (varied["fault_scheduling"] != current["fault_scheduling"])
        + (varied["pod_rescheduling"] != current["pod_rescheduling"])
    )


def _saves(current: float | None, candidate: float | None) -> float | None:
    if candidate is None:
        return None
    if current is None:
        return None  # the current policy lets the job fail: any working candidate saves the job
    return round(current - candidate, 3)


# --- the fleet view ---------------------------------------------------------------------------------
def summary_store(job: TrainingJob, advice: dict[str, Any], now: datetime | None = None) -> AdviceSummary:
    """Keep what the jobs list shows: the best candidate's saving against the current policy."""
    best = next((c for c in advice["candidates"] if c["expected_lost_npu_hours_per_week"] is not None), None)
    current = advice["current"]["expected_lost_npu_hours_per_week"]
    best_loss = best["expected_lost_npu_hours_per_week"] if best else None
    if current is None:
        # The job fails under its policy: what it could save is everything the best candidate keeps.
        could_save = float("inf") if best_loss is not None else 0.0
    else:
        could_save = max(0.0, current - best_loss) if best_loss is not None else 0.0
    summary, _ = AdviceSummary.objects.update_or_create(
        job=job,
        defaults={
            "could_save": min(could_save, 1e12),
            "current_loss": current,
            "best_loss": best_loss,
            "best": best["spec"] if best else {},
            "faults": advice["history"]["faults"],
            "computed_at": now or timezone.now(),
        },
    )
    # The jobs list sorts, filters and shows its copy (TrainingJob.could_save, on an index), rounded to
    # the hundredth as the list shows it: the database renders list rows (apps/api/jobs/list_rows.py),
    # and its own rounding of a float differs from Python's on ties (12.345).
    TrainingJob.objects.filter(pk=job.pk).update(could_save=round(summary.could_save, 2))
    return summary


def summary_refresh(job: TrainingJob) -> AdviceSummary:
    """Recompute a job's fleet figure with the default assumptions."""
    return summary_store(job, advise(job))


def summaries_refresh_stale(limit: int = 200, max_age: timedelta = timedelta(hours=6)) -> int:
    """Refresh the fleet figure of jobs whose incidents changed since it was computed (or that have
    none yet, or an old one: the window slides). Returns how many were refreshed."""
    newest_incident = Subquery(
        Incident.objects.filter(job=OuterRef("pk")).order_by("-updated_at").values("updated_at")[:1]
    )
    stale = (
        TrainingJob.objects.filter(deleted_at__isnull=True)
        .annotate(newest=newest_incident)
        .filter(
            Q(newest__isnull=False, advice_summary__isnull=True)
            | Q(newest__gt=F("advice_summary__computed_at"))
            | Q(advice_summary__computed_at__lt=timezone.now() - max_age)
        )
        .select_related("current_revision")
        .order_by("pk")[:limit]
    )
    count = 0
    for job in stale:
        summary_refresh(job)
        count += 1
    return count

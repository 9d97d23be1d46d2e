"""The fleet view (design §4.8): what faults cost over a window, per cluster, per namespace and in
total, read from the stored summaries only (``apps.fleet.models``), never from raw events.

Lost NPU-hours = detection + decision + recovery (each incident's measured durations, else the
advice's priors; ``apps.advice.lost``) x the job's NPUs, + rollbacks x NPUs x half the checkpoint
period. Scope: the namespaces where the user holds a role (``namespace_coverage``): rows of jobs the
user may not see are never read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Final
from urllib.parse import urlencode

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import F, FloatField, Q, Sum
from django.db.models.functions import Cast
from django.utils import timezone

from apps.accounts.selectors import namespace_coverage
from apps.advice import assumptions as A
from apps.advice.fleet import advice_columns
from apps.advice.lost import COMPONENTS, rollback_seconds
from apps.fleet.aggregate import Group, no_jit, window_sums
from apps.fleet.models import JobDay, NamespaceCount, NamespaceDay
from apps.fleet.summaries import day_of
from apps.jobs.models import Cluster, TrainingJob

DEFAULT_WINDOW_DAYS: Final = 7
TOP_JOBS: Final = 10
MODEL_TEXT: Final = (
    "Per closed incident: (detection + decision + recovery) x the job's NPUs, each duration the "
    "incident's measured one, else the strategy advice's prior for that step; plus, when training "
    "restarted from its last checkpoint (Pod- or Job-level rescheduling without a dump saved first), "
    "half a checkpoint period x the job's NPUs. The same model the strategy advice prices faults with."
)


@dataclass(frozen=True)
class Scope:
    window_days: int = DEFAULT_WINDOW_DAYS
    cluster: Cluster | None = None
    namespace: str | None = None
    checkpoint_period_s: int | None = None


def _body(group: Group, days: list[date] | None, rollback_s: float, jobs_url: str) -> dict[str, Any]:
    """One scope's figures; ``days``: with the faults per day (the total and the clusters)."""
    t = group.tally
    lost = {
        "detection": t.detection_npu_s / 3600,
        "decision": t.decision_npu_s / 3600,
        "recovery": t.recovery_npu_s / 3600,
        "rollback": t.rollback_npus * rollback_s / 3600,
    }
    total = sum(lost.values())
    scheduled = group.npu_s_scheduled / 3600
    faults: dict[str, Any] = {"total": t.faults, "by_kind": {k: v for k, v in sorted(t.by_kind.items()) if v}}
    if days is not None:
        faults["buckets"] = [
            {
                "start": day.isoformat(),
                "total": sum(group.per_day.get(day, {}).values()),
                "by_kind": {k: v for k, v in sorted(group.per_day.get(day, {}).items()) if v},
            }
            for day in days
        ]
    return {
        "npu_hours_scheduled": round(scheduled, 3),
        "npu_hours_lost": {
            "total": round(total, 3),
            **{name: round(lost[name], 3) for name in COMPONENTS},
            "rollbacks": t.rollbacks,
            "sources": {
                k: {s: n for s, n in sorted(v.items()) if n} for k, v in sorted(t.sources.items()) if v
            },
        },
        # 1 - lost / scheduled; null before any NPU time is counted in the scope.
        "effective_training_ratio": round(max(0.0, 1 - total / scheduled), 6) if scheduled > 0 else None,
        "faults": faults,
        "mttr_seconds": {
            strategy: {"median": m.median, "p90": m.p90, "samples": m.samples}
            for strategy, m in sorted(group.mttr.items())
        },
        "recoveries": {
            "by_outcome": {k: v for k, v in sorted(t.recoveries.items()) if v},
            "by_strategy": {
                k: {o: n for o, n in sorted(v.items()) if n} for k, v in sorted(t.by_strategy.items()) if v
            },
        },
        "jobs_url": jobs_url,
    }


def jobs_url(cluster: str | None = None, namespace: str | None = None) -> str:
    """The jobs overview filtered to a scope: where every figure of the fleet page links to."""
    query = {k: v for k, v in (("cluster", cluster), ("namespace", namespace)) if v}
    return "/" + (f"?{urlencode(query)}" if query else "")


def _scoped(model: Any, covered: Q | None, scope: Scope, first: date, last: date) -> Any:
    """``model``'s rows in the window and the scope, of the namespaces ``covered`` (None = all)."""
    return _in_scope(model.objects.filter(day__gte=first, day__lte=last), covered, scope)


def _in_scope(rows: Any, covered: Q | None, scope: Scope) -> Any:
    """``rows`` of the scope, of the namespaces ``covered`` (None = all)."""
    if covered is not None:
        rows = rows.filter(covered)
    if scope.cluster is not None:
        rows = rows.filter(cluster_id=scope.cluster.pk)
    if scope.namespace:
        rows = rows.filter(namespace=scope.namespace)
    return rows


def _period(scope: Scope) -> A.Assumption:
    return A.parameter(
        "checkpoint_period_s",
        scope.checkpoint_period_s,
        A.DEFAULT_CHECKPOINT_PERIOD_S,
        "s",
        "time between checkpoints; a restart from the last one loses half of it on average "
        "(reference/mindcluster.md §7.3); set ?checkpoint_period_s= to your fleet's",
    )


def fleet_view(
    user: User | AnonymousUser, scope: Scope, now: datetime | None = None, use_sql: bool | None = None
) -> dict[str, Any]:
    """The body of ``GET /api/v1/fleet/`` (inputs already validated; ``use_sql``: see ``aggregate``)."""
    now = now or timezone.now()
    last = day_of(now)
    first = last - timedelta(days=scope.window_days - 1)
    days = [first + timedelta(days=i) for i in range(scope.window_days)]
    period = _period(scope)
    rollback_s = rollback_seconds(period.value)

    names = dict(Cluster.objects.values_list("pk", "name"))
    covered = namespace_coverage(user)  # read once: the user's grants as a filter on the rows
    with no_jit():
        sums = window_sums(
            _scoped(NamespaceDay, covered, scope, first, last),
            _in_scope(NamespaceCount.objects.all(), covered, scope),
            first,
            last,
            use_sql=use_sql,
        )
        top_jobs = _top_jobs(covered, scope, first, last, rollback_s, names)

    return {
        "window": {
            "days": scope.window_days,
            "start": first.isoformat(),
            "end": last.isoformat(),
            "bucket": "day",
            "timezone": "UTC",
        },
        "filters": {
            "cluster": scope.cluster.name if scope.cluster else None,
            "namespace": scope.namespace or None,
        },
        "model": {
            "description": MODEL_TEXT,
            "assumptions": [period.as_dict(), *(A.PRIORS[name].as_dict() for name in A.PRIORS)],
        },
        "total": _body(
            sums.total,
            days,
            rollback_s,
            jobs_url(scope.cluster.name if scope.cluster else None, scope.namespace),
        ),
        "clusters": [
            {
                "cluster": names.get(pk, str(pk)),
                "cluster_id": pk,
                **_body(group, days, rollback_s, jobs_url(names.get(pk))),
            }
            for pk, group in sorted(sums.clusters.items(), key=lambda item: names.get(item[0], ""))
        ],
        "namespaces": [
            {
                "cluster": names.get(pk, str(pk)),
                "cluster_id": pk,
                "namespace": ns,
                **_body(group, None, rollback_s, jobs_url(names.get(pk), ns)),
            }
            for (pk, ns), group in sorted(
                sums.namespaces.items(), key=lambda item: (names.get(item[0][0], ""), item[0][1])
            )
        ],
        "top_jobs": top_jobs,
    }


def _top_jobs(
    covered: Q | None,
    scope: Scope,
    first: date,
    last: date,
    rollback_s: float,
    names: dict[int, str],
) -> list[dict[str, Any]]:
    """The jobs that lost most NPU-hours in the window, with what their advice says they could save."""
    stopped = F("detection_npu_s") + F("decision_npu_s") + F("recovery_npu_s")
    lost = stopped + Cast(F("rollback_npus"), FloatField()) * rollback_s
    ranked = (
        _scoped(JobDay, covered, scope, first, last)
        .values("job_id")
        .annotate(
            lost_npu_s=Sum(lost),
            faults=Sum("faults"),
            rollback_npus=Sum("rollback_npus"),
            stopped_npu_s=Sum(stopped),
        )
        .filter(~Q(lost_npu_s=0))
        .order_by("-lost_npu_s", "job_id")[:TOP_JOBS]
    )
    ranked = list(ranked)
    jobs = {
        job.pk: job
        for job in TrainingJob.objects.filter(pk__in=[r["job_id"] for r in ranked]).select_related(
            "advice_summary"
        )
    }
    out = []
    for row in ranked:
        job = jobs[row["job_id"]]
        advice = advice_columns(job)
        out.append(
            {
                "job": job.pk,
                "name": job.name,
                "cluster": names.get(job.cluster_id, str(job.cluster_id)),
                "namespace": job.namespace,
                "deleted": job.deleted_at is not None,
                "faults": row["faults"],
                "npu_hours_lost": round(row["lost_npu_s"] / 3600, 3),
                "npu_hours_lost_rollback": round(row["rollback_npus"] * rollback_s / 3600, 3),
                "could_save": advice["could_save"],
                "advice_best": advice["advice_best"],
                "url": f"/jobs/{job.pk}/",
                "advice_url": f"/jobs/{job.pk}/#advice",
            }
        )
    return out

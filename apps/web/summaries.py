"""Read-only summaries the dashboard pages start from (one bounded set of queries per page, no N+1)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Max, OuterRef, Q, Subquery

from apps.accounts.selectors import jobs_visible_to
from apps.advice.fleet import advice_columns
from apps.events.incident_services import restarts_over_time
from apps.events.models import Incident, JobEvent, RestartBudget
from apps.jobs.models import TrainingJob
from apps.policies.models import PolicySync
from apps.policies.observed import in_effect_briefs

BOOTSTRAP_INCIDENTS = 100


def _latest_sync_state() -> Subquery:
    return Subquery(
        PolicySync.objects.filter(job=OuterRef("pk")).order_by("-generation", "-id").values("state")[:1]
    )


def _incident_brief(incident: Incident) -> dict[str, Any]:
    return {
        "number": incident.number,
        "outcome": incident.outcome,
        "opened_at": incident.opened_at.isoformat(),
        "closed_at": incident.closed_at.isoformat() if incident.closed_at else None,
        "strategies": incident.strategies,
    }


def budget_of(job: TrainingJob) -> dict[str, Any]:
    """The same body as ``GET /api/v1/jobs/{id}/budget/``: limits, use, and reschedules over time."""
    budget = RestartBudget.objects.filter(job=job).first() or RestartBudget(job=job)
    return {"job": job.pk, **budget.as_dict(), "restarts": restarts_over_time(job)}


def _summary(
    job: TrainingJob,
    budget: RestartBudget | None,
    incident: Incident | None,
    in_effect: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec = job.current_revision.spec if job.current_revision else None
    restarts = (budget.reschedules_used + budget.process_restarts_used) if budget else 0
    return {
        "id": job.pk,
        "cluster": job.cluster.name,
        "namespace": job.namespace,
        "name": job.name,
        "framework": job.framework,
        "mindcluster_version": job.mindcluster_version,
        "phase": job.phase,
        "revision": job.current_revision.number if job.current_revision else None,
        "strategies": list(spec.get("strategies", [])) if spec else [],
        "platform_mode": bool(spec.get("platform_mode")) if spec else False,
        "sync_state": getattr(job, "sync_state", None),  # written, not in effect
        "in_effect": in_effect,
        "restarts": restarts,
        "budget_exhausted": bool(budget and budget.exhausted),
        "last_incident": _incident_brief(incident) if incident else None,
        "recovering": bool(incident and incident.closed_at is None),
        **advice_columns(job),
    }


def job_summary(user: User | AnonymousUser, job_id: int) -> dict[str, Any] | None:
    """One job's overview row (the live badge in the job page header, a live row of the overview)."""
    for row in job_summaries_for_ids(user, [job_id]):
        return row
    return None


def job_summaries_for_ids(user: User | AnonymousUser, ids: list[int]) -> list[dict[str, Any]]:
    """The overview rows of these jobs (those the user may see), in the order of ``ids``.

    Five queries whatever the number of jobs: the jobs with their cluster, revision, advice and
    newest sync state; their budgets; their newest incidents; their incarnations.
    """
    found = {
        job.pk: job
        for job in jobs_visible_to(user)
        .filter(pk__in=ids)
        .select_related("cluster", "current_revision", "advice_summary")
        .annotate(sync_state=_latest_sync_state(), last_incident_number=Max("incidents__number"))
    }
    jobs = [found[pk] for pk in ids if pk in found]
    budgets = {b.job_id: b for b in RestartBudget.objects.filter(job_id__in=list(found))}
    # The newest incident per job: one query for the exact (job, number) pairs.
    newest = Q(pk__in=[])
    for job in jobs:
        if job.last_incident_number:
            newest |= Q(job_id=job.pk, number=job.last_incident_number)
    incidents = {i.job_id: i for i in Incident.objects.filter(newest)} if len(newest) else {}
    briefs = in_effect_briefs(jobs)
    return [_summary(job, budgets.get(job.pk), incidents.get(job.pk), briefs.get(job.pk)) for job in jobs]


def recent_incidents(job_id: int) -> list[dict[str, Any]]:
    """The newest incidents of a job, oldest first (the chart reads left to right)."""
    rows = Incident.objects.filter(job_id=job_id).order_by("-number")[:BOOTSTRAP_INCIDENTS]
    return [incident.as_dict() for incident in reversed(list(rows))]


def last_event_seq(job_id: int) -> int:
    """The job's newest event ``seq`` (0 when none): the page fetches the newest page from here."""
    return JobEvent.objects.filter(job_id=job_id).aggregate(last=Max("seq"))["last"] or 0

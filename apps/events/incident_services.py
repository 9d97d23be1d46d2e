"""Incidents and restart budgets in the database, kept in step with every stored event.

All functions run inside the caller's transaction with the job row already locked (``event_record``
locks it), so two ingesters, a worker and the decisions app serialise per job.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from apps.core import metrics
from apps.events import incidents as fold
from apps.events import kinds, rows, signals
from apps.events.models import Incident, JobEvent, RestartBudget
from apps.jobs.models import TrainingJob

# Kubernetes timestamps have second precision: a report stamped up to this long after an incident
# closed may still be a late copy of its fault.
LATE_SKEW = timedelta(seconds=2)


def _late_window() -> timedelta:
    return timedelta(seconds=settings.EVENTS_INCIDENT_LATE_SECONDS)


@dataclass
class IncidentPlan:
    """Where an incident-scoped event goes, under which kind and key, or that it only enriches."""

    incident: Incident | None
    kind: str
    dedupe_key: str
    data: dict[str, Any]
    enrich_only: bool = False


# The incident's fields the fold (``apps.events.incidents``) computes.
_FOLDED = tuple(fold.new_incident(timezone.now()))


def _fields(incident: Incident) -> dict[str, Any]:
    """The folded fields as a copy the fold may change in place: ``_save`` writes those that differ."""
    return {name: copy.deepcopy(getattr(incident, name)) for name in _FOLDED}


def _save(incident: Incident, state: dict[str, Any], *also: str) -> None:
    """Store ``state`` (and the fields named in ``also``, set by the caller): only what changed, so
    the statement is short and the jobs list's ``last_fault_at`` is refreshed only when ``opened_at``
    moved (``apps.policies.listing``)."""
    previous_opened_at = incident.opened_at
    changed = [name for name, value in state.items() if getattr(incident, name) != value]
    for name in changed:
        setattr(incident, name, state[name])
    if incident.pk is None:  # planned with its first event (``incident_plan``)
        incident.save(force_insert=True)
    else:
        incident.save(update_fields=[*changed, *also, "updated_at"])
    if incident.closed_at is not None:
        # Store first: the fleet summary (apps.fleet) follows in this same transaction.
        signals.incident_changed.send(Incident, incident=incident, previous_opened_at=previous_opened_at)


def open_incident(job: TrainingJob) -> Incident | None:
    return Incident.objects.filter(job=job, closed_at__isnull=True).first()


def latest_incident(job: TrainingJob) -> Incident | None:
    return Incident.objects.filter(job=job).order_by("-number").first()


def _new(job: TrainingJob, at: datetime, latest: Incident | None) -> Incident:
    """The job's next incident, not stored yet; ``latest`` is its newest one, read under the job lock."""
    number = (latest.number if latest else 0) + 1
    return Incident(job=job, number=number, first_seq=0, last_seq=0, **fold.new_incident(at))


def _create(job: TrainingJob, at: datetime, latest: Incident | None) -> Incident:
    """``_new``, stored now (its id names the keys of the events that follow it)."""
    incident = _new(job, at, latest)
    incident.save(force_insert=True)
    return incident  # "incident.opened" goes out when its first event is folded in (incident_follow)


def incident_none_recent(job: TrainingJob) -> bool:
    """No open incident and none closed within the late window: a new fault report of the job opens
    an incident of its own, whatever older report of the job may still arrive (apps.ingest.express)."""
    latest = list(
        Incident.objects.filter(job=job).order_by("-number").values_list("closed_at", flat=True)[:1]
    )
    if not latest:
        return True
    closed_at = latest[0]
    return closed_at is not None and timezone.now() - closed_at > _late_window()


def _is_late_copy(incident: Incident, data: dict[str, Any], at: datetime) -> bool:
    """A fault report of a just-closed incident's fault that arrived after it closed."""
    if incident.closed_at is None:
        return False
    signatures = incident.fault.get("signatures") or []
    if not signatures:
        # The incident was opened by its outcome (reported first): this is its fault, arriving late.
        return at <= incident.closed_at + LATE_SKEW
    if fold.fault_signature(data) not in signatures:
        return False
    ids = incident.fault.get("fault_ids") or []
    reported = data.get("fault_id") or next(iter(data.get("fault_reasons") or []), None)
    if reported and ids:
        return reported in ids
    return at <= incident.closed_at + LATE_SKEW


_INCIDENTS = Incident._meta.db_table
_CANDIDATES_SQL = (
    f"SELECT {rows.columns(Incident)} FROM {_INCIDENTS} WHERE job_id = %s AND (closed_at IS NULL"
    f" OR number = (SELECT MAX(number) FROM {_INCIDENTS} WHERE job_id = %s)"
    " OR fault -> 'fault_ids' ?| %s)"
)


@dataclass
class _Candidates:
    """The incidents of a job an event may belong to, read in one query under the job's lock."""

    holding: Incident | None  # the first that holds one of the event's fault ids (the original)
    open: Incident | None
    latest: Incident | None


def _candidates(job: TrainingJob, ids: list[str]) -> _Candidates:
    """The job's open and newest incidents, and the first holding one of ``ids``: one query, not three.

    Any incident may hold the ids, not only the latest: a replayed or lagging report may arrive after
    later incidents opened, and it still belongs to the one that holds its fault.
    """
    candidates: Iterable[Incident]
    if connection.vendor == "postgresql":
        # Raw: the ORM spent more compiling this (a subquery, one JSON lookup per id) than running it.
        candidates = rows.models_of(Incident, _CANDIDATES_SQL, [job.pk, job.pk, ids])
    else:
        candidates = Incident.objects.filter(job=job)  # SQLite: no JSON containment; all, matched below
    found = sorted(candidates, key=lambda incident: incident.number)
    return _Candidates(
        holding=next((i for i in found if set(ids) & set(i.fault.get("fault_ids") or [])), None),
        open=next((i for i in found if i.closed_at is None), None),
        latest=found[-1] if found else None,
    )


def incident_plan(
    *, job: TrainingJob, kind: str, data: dict[str, Any], at: datetime, source_key: str
) -> IncidentPlan:
    """Choose the incident for an incident-scoped event and give it a key that two sources share."""
    data = dict(data)
    candidates = _candidates(job, fold.fault_ids(data) if kind == kinds.FAULT_DETECTED else [])
    if candidates.holding is not None:
        # A fault is stored once per (job, fault id): any later report of it joins its incident.
        return IncidentPlan(candidates.holding, kind, "", data, enrich_only=True)
    current = candidates.open
    if current is None:
        last = candidates.latest
        recent = (
            last is not None
            and last.closed_at is not None
            # The event's own time: an outcome replayed after an outage is as recent as it was then.
            and min(at, timezone.now()) - last.closed_at <= _late_window()
        )
        if kind == kinds.FAULT_DETECTED and last is not None and _is_late_copy(last, data, at):
            if last.fault.get("signatures"):
                return IncidentPlan(last, kind, "", data, enrich_only=True)
            # The fault of an incident its outcome opened (the fault's source lagged: a take-over's
            # replay, a quiet watch, Events in an etcd of their own): stored in it as it would have
            # been in order, so the incident's events do not depend on which source came first.
            current = last
        elif (
            kind in fold.OPENING_KINDS
            and kind != kinds.FAULT_DETECTED
            and last is not None
            and last.closed_at is not None
            and at <= last.closed_at
        ):
            # A strategy or a stop that happened before the newest incident closed, reported after
            # it (its Event or ConfigMap lagged the PodGroup): it is that incident's, not a new one
            # that nothing would ever close.
            current = last
        elif kind in fold.OUTCOME_KINDS and recent:
            current = last
        elif kind == kinds.FAULT_DETECTED and fold.fault_ids(data):
            # Its key is the fault's id, not the incident's: stored with its first event
            # (``incident_follow``), one INSERT instead of an INSERT and an UPDATE.
            current = _new(job, at, last)
        else:
            current = _create(job, at, last)
    assert current is not None
    key = source_key
    if kind == kinds.FAULT_DETECTED:
        signature = fold.fault_signature(data)
        # ClusterD's reset.json fault list names ranks only, never a code or a node (setNewTaskInfo,
        # component/clusterd/pkg/domain/common/utils.go:231-269; facts D12): it is the ranks of the
        # fault the open incident already holds, not a fault of its own.
        ranks_only = not data.get("code") and "node" not in data and bool(data.get("ranks"))
        if signature in (current.fault.get("signatures") or []) or (
            ranks_only and current.fault.get("signatures")
        ):
            return IncidentPlan(current, kind, "", data, enrich_only=True)
        ids = fold.fault_ids(data)
        # Keyed by the fault's id where it has one, so the unique (job, key) constraint holds it to
        # one row whatever incident a racing or replayed copy would choose; else one per incident.
        key = f"fault:{ids[0]}" if ids else f"fault:{current.pk}:{signature}"
    elif kind in kinds.STRATEGY_KINDS:
        strategy = str(data.get("strategy") or "")
        # This strategy may be known already from its result (reported first): not a change from it.
        before = list(current.strategies or [])
        if before and before[-1] == strategy:
            before.pop()
        if before:
            kind = kinds.STRATEGY_CHANGED
            data.setdefault("previous", before[-1])
        else:
            kind = kinds.STRATEGY_CHOSEN
        key = f"strategy:{current.pk}:{strategy}"
    elif kind in (kinds.RECOVERY_SUCCEEDED, kinds.RECOVERY_FAILED):
        key = f"{kind}:{current.pk}:{data.get('strategy', '')}"
    elif kind in (kinds.DUMP_SAVED, kinds.TRAINING_EXITED, kinds.TRAINING_STOPPED):
        key = f"{kind}:{current.pk}"
    return IncidentPlan(current, kind, key, data)


def incident_enrich(incident: Incident, data: dict[str, Any], at: datetime) -> None:
    """Fold a duplicate fault report into its incident without storing another event."""
    state = _fields(incident)
    fold.merge_fault(state, data, at)
    if incident.closed_at is not None:
        state.update(fold.durations(state))
    _save(incident, state)


def incident_follow(event: JobEvent, incident: Incident | None) -> None:
    """Apply a stored event to its incident (``None``: the job's open incident, if any)."""
    if incident is None:
        if event.kind not in fold.DECISION_KINDS and event.kind != kinds.JOB_PHASE_CHANGED:
            return
        incident = open_incident(event.job)
        if incident is None and event.kind == kinds.DECISION_REQUESTED:
            # ClusterD asks only about a fault it is handling, and ``decide`` (its own process, no
            # reordering hold) often stores the question before the ingester stores the fault:
            # the question opens the incident, and the fault joins it.
            incident = _create(event.job, event.occurred_at, latest_incident(event.job))
        if incident is None:
            return
    state = _fields(incident)
    changes = fold.apply(state, event.kind, event.data or {}, event.occurred_at)
    opened = not incident.first_seq
    incident.first_seq = incident.first_seq or event.seq
    incident.last_seq = max(incident.last_seq, event.seq)
    _save(incident, state, "first_seq", "last_seq")
    # Webhook deliveries are written in this transaction (an outbox), not after it.
    if opened:
        _notify_incident("incident.opened", event.job, incident)
    if "closed" in changes:
        _notify_incident("incident.closed", event.job, incident)
        outcome = str(state.get("outcome") or "unknown")
        transaction.on_commit(lambda: metrics.INCIDENTS.labels(outcome=outcome).inc())


def budget_for(job: TrainingJob) -> RestartBudget:
    budget, _ = RestartBudget.objects.get_or_create(job=job)
    return budget


def budget_set_limits(*, job: TrainingJob, backoff_limit: int | None, fault_retry_times: int) -> None:
    """Record the limits the live AscendJob carries, and ``max_restarts`` from the job's policy."""
    budget = budget_for(job)
    spec = job.current_revision.spec if job.current_revision else {}
    max_restarts = spec.get("max_restarts") if isinstance(spec, dict) else None
    budget.backoff_limit = backoff_limit
    budget.fault_retry_times = fault_retry_times
    budget.max_restarts = max_restarts if isinstance(max_restarts, int) else None
    _budget_save(budget)


def budget_follow(event: JobEvent) -> None:
    """Count reschedules and process restarts as the events that consume them are stored."""
    data = event.data or {}
    if event.kind in kinds.RESCHEDULE_KINDS:
        budget = budget_for(event.job)
        # job-reschedule-reason counts reschedules itself; trust its total over our count.
        budget.reschedules_used = max(budget.reschedules_used + 1, int(data.get("total") or 0))
        _budget_save(budget)
    elif event.kind in kinds.STRATEGY_KINDS and data.get("strategy") in fold.PROCESS_RESTART_STRATEGIES:
        budget = budget_for(event.job)
        budget.process_restarts_used += 1
        _budget_save(budget)


def _budget_save(budget: RestartBudget) -> None:
    newly_exhausted = budget.exhausted and budget.exhausted_at is None
    if newly_exhausted:
        budget.exhausted_at = timezone.now()
    elif not budget.exhausted:
        budget.exhausted_at = None
    budget.save()
    if newly_exhausted:
        from apps.events.webhooks import webhooks_notify

        webhooks_notify(kind="budget.exhausted", job=budget.job, payload=lambda: {"budget": budget.as_dict()})


def _notify_incident(kind: str, job: TrainingJob, incident: Incident) -> None:
    from apps.events.webhooks import webhooks_notify

    webhooks_notify(kind=kind, job=job, payload=lambda: {"incident": incident.as_dict()})


def restarts_over_time(job: TrainingJob) -> list[dict[str, Any]]:
    """Every reschedule of the job, oldest first, with the running total (for a chart)."""
    rows = JobEvent.objects.filter(job=job, kind__in=kinds.RESCHEDULE_KINDS).order_by("seq")
    return [
        {
            "at": e.occurred_at.isoformat(),
            "kind": e.kind,
            "seq": e.seq,
            "total": i + 1,
            "reasons": e.data.get("reasons", []),
        }
        for i, e in enumerate(rows.only("occurred_at", "kind", "seq", "data"))
    ]

"""The jobs list's sort and filter columns on ``TrainingJob``, kept in step with the facts they copy.

The list sorts and filters 100,000 jobs by strategy, in-effect state and last fault; computed per
row (a revision's spec, the in-effect comparison, the newest incident) that is a scan, so each job
carries a copy on an index (``apps/jobs/models.py``). The facts stay where they are:

- ``strategies`` and ``in_effect_state`` are recomputed here whenever the current revision changes
  (``policy_revision_create`` and the admission call ``listing_refresh``) and when an incarnation is
  observed (``post_save`` of ``JobIncarnation``: its observers live below this layer, in the
  ingester, adoption and push, and none of them should have to know about the list);
- ``last_fault_at`` follows ``post_save`` of ``Incident``.

The two receivers run after their transaction commits: the observers hold row locks (the
incarnation's, the incident's) and taking the job's row inside them would order locks differently
from the push, which locks the job first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection, transaction
from django.db.models.signals import post_save

from apps.events.models import Incident
from apps.jobs.models import JobIncarnation, TrainingJob
from apps.policies.observed import in_effect_briefs

STATE_IN_EFFECT = "in-effect"
STATE_WAITING = "waiting"
STATE_UNKNOWN = "unknown"
IN_EFFECT_STATES = (STATE_IN_EFFECT, STATE_WAITING, STATE_UNKNOWN)


def strategies_column(spec: dict[str, Any] | None) -> str:
    """The strategies of a stored spec as the column holds them: in the spec's order, comma-joined."""
    return ",".join(str(s) for s in (spec or {}).get("strategies") or [])


def in_effect_column(brief: dict[str, Any] | None) -> str:
    return str(brief["state"]) if brief else STATE_UNKNOWN


def listing_refresh(job_ids: Iterable[int]) -> None:
    """Recompute ``strategies`` and ``in_effect_state`` of these jobs (one read, an update per change)."""
    jobs = list(TrainingJob.objects.filter(pk__in=list(job_ids)).select_related("current_revision"))
    briefs = in_effect_briefs(jobs)
    for job in jobs:
        spec = job.current_revision.spec if job.current_revision else None
        values = {
            "strategies": strategies_column(spec),
            "in_effect_state": in_effect_column(briefs.get(job.pk)),
        }
        if any(getattr(job, name) != value for name, value in values.items()):
            # Not save(): updated_at says when the job changed, not when its list columns did.
            TrainingJob.objects.filter(pk=job.pk).update(**values)
            for name, value in values.items():
                setattr(job, name, value)


def last_fault_refresh(job_id: int) -> int:
    """``last_fault_at`` from the job's incidents, in one UPDATE that writes only a change.

    Most incident saves leave the newest ``opened_at`` as it was; an UPDATE that matches no row
    writes no WAL, so its commit waits for no disk flush (about 3 ms each on the bench's disk, two
    per fault in a storm; issue #27). Raw SQL: the ORM took longer to compile it than the database
    to run it. "Differs" is null-safe (SQLite spells it ``IS NOT``).
    """
    differs = "IS NOT" if connection.vendor == "sqlite" else "IS DISTINCT FROM"
    newest = f"SELECT MAX(opened_at) FROM {Incident._meta.db_table} WHERE job_id = %s"
    sql = (
        f"UPDATE {TrainingJob._meta.db_table} SET last_fault_at = ({newest}) "
        f"WHERE id = %s AND last_fault_at {differs} ({newest})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [job_id, job_id, job_id])
        return cursor.rowcount


def _on_incarnation_saved(sender: type[JobIncarnation], instance: JobIncarnation, **_: Any) -> None:
    job_id = instance.job_id
    transaction.on_commit(lambda: listing_refresh([job_id]))


class _LastFaultRefresh:
    """One job's pending ``last_fault_refresh``: an ``on_commit`` callback that can be recognised."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id

    def __call__(self) -> None:
        last_fault_refresh(self.job_id)


def _on_incident_saved(
    sender: type[Incident], instance: Incident, created: bool, update_fields: Any, **_: Any
) -> None:
    if not created and update_fields is not None and "opened_at" not in update_fields:
        return  # the job's newest opened_at cannot have moved (the events domain saves what changed)
    # One refresh per job per transaction: the ingester saves a job's incident several times in
    # one (planned, then followed by the event), and each refresh is an UPDATE committed on its own
    # after the transaction (issue #27). A callback dropped with a rolled-back savepoint is no
    # longer pending, so the next save registers its own.
    job_id = instance.job_id
    current = transaction.get_connection()
    if current.in_atomic_block and any(
        isinstance(func, _LastFaultRefresh) and func.job_id == job_id for _, func, _ in current.run_on_commit
    ):
        return
    transaction.on_commit(_LastFaultRefresh(job_id))


def connect_receivers() -> None:
    """Called once from ``PoliciesConfig.ready``."""
    post_save.connect(_on_incarnation_saved, sender=JobIncarnation, dispatch_uid="listing-incarnation")
    post_save.connect(_on_incident_saved, sender=Incident, dispatch_uid="listing-incident")

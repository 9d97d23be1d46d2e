"""The policy of a job as the API and the dashboard show it (one shape for both entry points)."""

from __future__ import annotations

import copy
import dataclasses
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Expression, F, FloatField, OuterRef, QuerySet, Subquery, TextField

from apps.api.policies.serializers import (
    SYNC_DATETIMES,
    SyncOutputSerializer,
    in_effect_output,
    sync_output,
)
from apps.core.compiled import CompiledQuery
from apps.core.sql_json import IsoUtc, JsonObject, database_renders_datetimes
from apps.jobs.models import TrainingJob
from apps.policies.in_effect import in_effect
from apps.policies.in_effect_cache import with_rows_fingerprint
from apps.policies.models import PolicyRevision, PolicySync
from apps.policies.services import job_context, policy_validate_for_job

# Read by every policy GET: compiled once (apps/core/compiled.py), it was a quarter of its CPU.
_LATEST_SYNC = CompiledQuery(
    lambda job_id: PolicySync.objects.filter(job_id=job_id).order_by("-generation", "-id")[:1], int
)


def latest_sync(job: TrainingJob) -> PolicySync | None:
    found = _LATEST_SYNC(job.pk)
    return found[0] if found else None


# The policy GET selects the latest push with the job, written by PostgreSQL as ``sync_output``
# writes it (a statement less per request: it was an eighth of the GET's CPU, bench/profile_api.py).
LATEST_SYNC = "latest_sync_json"


class _ElapsedMs(Expression):
    """``elapsed_ms(start, end)`` in float8 as Python computes it: whole microseconds divided by 10**6
    (both exact, the quotient correctly rounded on either side), times 1000."""

    output_field = FloatField()

    def __init__(self, start: Any, end: Any) -> None:
        super().__init__()
        self.start, self.end = start, end

    def get_source_expressions(self) -> list[Any]:
        return [self.start, self.end]

    def set_source_expressions(self, exprs: Sequence[Any]) -> None:
        self.start, self.end = exprs

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, tuple[Any, ...]]:
        start, start_params = compiler.compile(self.start)
        end, end_params = compiler.compile(self.end)
        micros = f"(EXTRACT(EPOCH FROM ({end} - {start})) * 1000000)::bigint"
        return f"({micros}::float8 / 1000000 * 1000)", (*end_params, *start_params)


def _sync_value(name: str) -> Any:
    if name == "revision":
        return F("generation")
    if name == "duration_ms":
        return _ElapsedMs(F("queued_at"), F("finished_at"))
    if name in SYNC_DATETIMES:
        return IsoUtc(F(name))
    return F(name)


def with_latest_sync(jobs: QuerySet[TrainingJob]) -> QuerySet[TrainingJob]:
    """``jobs`` selecting each job's latest push as ``sync_output``'s JSON (PostgreSQL)."""
    if connection.vendor != "postgresql":
        return jobs
    row = JsonObject({name: _sync_value(name) for name in SyncOutputSerializer.Meta.fields})
    latest = (
        PolicySync.objects.filter(job_id=OuterRef("pk"))
        .order_by("-generation", "-id")
        .annotate(sync_json=row)
        .values("sync_json")[:1]
    )
    return jobs.annotate(**{LATEST_SYNC: Subquery(latest, output_field=TextField())})


def policy_job_query(jobs: QuerySet[TrainingJob]) -> QuerySet[TrainingJob]:
    """The policy GET's job query: the in-effect fingerprint and the latest push with the job."""
    return with_latest_sync(with_rows_fingerprint(jobs))


def _latest_sync_output(job: TrainingJob) -> dict[str, Any] | None:
    """``sync_output`` of the job's latest push: as selected with the job (used once), else read."""
    if LATEST_SYNC in job.__dict__:
        selected = job.__dict__.pop(LATEST_SYNC)
        if database_renders_datetimes():
            if selected is None:
                return None
            out: dict[str, Any] = json.loads(selected)
            if out["duration_ms"] is not None:
                out["duration_ms"] = float(out["duration_ms"])  # JSON's 1000 is Python's 1000.0
            return out
    sync = latest_sync(job)
    return sync_output(sync) if sync else None


# The validator is a pure function of the spec and the job's facts: its warnings are kept per (spec,
# facts), most recent last. Re-validating on every policy GET was ~8 % of its CPU
# (bench/profile_api.py). The key is the spec's content, not its revision: a fleet's jobs share a few
# presets, so one entry serves every job whose spec and facts are alike (keyed per revision, random
# reads of 10,000 jobs each with its own revision validated again on most first reads). The job's
# name and namespace are left out of the key: no rule reads them
# (tests/policies/test_validation_properties.py holds the validator to that). An entry is one
# spec's warnings, most often none (~0.5 KB with its key): 16,384 of them are a few MB per process.
_WARNINGS_KEPT = 16_384
_warnings: OrderedDict[tuple[str, str], list[dict[str, Any]]] = OrderedDict()
_warnings_lock = threading.Lock()


def _warnings_key(job: TrainingJob, spec: Any) -> tuple[str, str]:
    # The spec as stored (jsonb gives its keys in one order) and the facts the validator gets.
    facts = dataclasses.replace(job_context(job), name=None, namespace=None)
    return json.dumps(spec), repr(facts)


def revision_warnings(job: TrainingJob, revision: PolicyRevision) -> list[dict[str, Any]]:
    """The validator's warnings on ``revision`` for ``job`` as it is now (a new list each call)."""
    key = _warnings_key(job, revision.spec)
    with _warnings_lock:
        found = _warnings.get(key)
        if found is not None:
            _warnings.move_to_end(key)
    if found is None:
        found = [issue.to_dict() for issue in policy_validate_for_job(job=job, spec=revision.spec).warnings]
        with _warnings_lock:
            _warnings[key] = found
            while len(_warnings) > _WARNINGS_KEPT:
                _warnings.popitem(last=False)
    return copy.deepcopy(found) if found else []


def policy_body(job: TrainingJob, warnings: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The current policy of ``job`` with its latest push; warnings re-computed when not given."""
    revision = job.current_revision
    if warnings is None and revision is not None:
        warnings = revision_warnings(job, revision)
    sync = _latest_sync_output(job)
    return {
        "job": job.pk,
        "revision": revision.number if revision else None,
        "spec": revision.spec if revision else None,
        "source": revision.source if revision else None,
        "comment": revision.comment if revision else "",
        "author": revision.author_name if revision else "",
        "created_at": revision.created_at if revision else None,
        "warnings": warnings or [],
        "sync": sync,
        "in_effect": in_effect_output(in_effect(job)),
    }

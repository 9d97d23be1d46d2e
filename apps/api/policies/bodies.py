"""The policy of a job as the API and the dashboard show it (one shape for both entry points)."""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from typing import Any

from apps.api.policies.serializers import in_effect_output, sync_output
from apps.core.compiled import CompiledQuery
from apps.jobs.models import TrainingJob
from apps.policies.in_effect import in_effect
from apps.policies.models import PolicyRevision, PolicySync
from apps.policies.services import job_context, policy_validate_for_job

# Read by every policy GET: compiled once (apps/core/compiled.py), it was a quarter of its CPU.
_LATEST_SYNC = CompiledQuery(
    lambda job_id: PolicySync.objects.filter(job_id=job_id).order_by("-generation", "-id")[:1], int
)


def latest_sync(job: TrainingJob) -> PolicySync | None:
    found = _LATEST_SYNC(job.pk)
    return found[0] if found else None


# The validator is a pure function of the spec and the job's facts, and a revision never changes
# (PolicyRevision is write-once): its warnings are kept per (revision, job facts), most recent last.
# Re-validating on every policy GET was ~8 % of its CPU (bench/profile_api.py). An entry is the
# warnings of one revision, most often none (~0.3 KB with its key): 16,384 of them are a few MB per
# process and hold a fleet's current revisions (at 4,096, random reads of 10,000 jobs validated
# again more often than not).
_WARNINGS_KEPT = 16_384
_warnings: OrderedDict[tuple[int, str], list[dict[str, Any]]] = OrderedDict()
_warnings_lock = threading.Lock()


def revision_warnings(job: TrainingJob, revision: PolicyRevision) -> list[dict[str, Any]]:
    """The validator's warnings on ``revision`` for ``job`` as it is now (a new list each call)."""
    key = (revision.pk, repr(job_context(job)))  # the facts as the validator gets them (a dataclass)
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
    sync = latest_sync(job)
    return {
        "job": job.pk,
        "revision": revision.number if revision else None,
        "spec": revision.spec if revision else None,
        "source": revision.source if revision else None,
        "comment": revision.comment if revision else "",
        "author": revision.author_name if revision else "",
        "created_at": revision.created_at if revision else None,
        "warnings": warnings or [],
        "sync": sync_output(sync) if sync else None,
        "in_effect": in_effect_output(in_effect(job)),
    }

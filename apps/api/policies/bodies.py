"""The policy of a job as the API and the dashboard show it (one shape for both entry points)."""

from __future__ import annotations

from typing import Any

from apps.api.policies.serializers import in_effect_output, sync_output
from apps.core.compiled import CompiledQuery
from apps.jobs.models import TrainingJob
from apps.policies.in_effect import in_effect
from apps.policies.models import PolicySync
from apps.policies.services import policy_validate_for_job

# Read by every policy GET: compiled once (apps/core/compiled.py), it was a quarter of its CPU.
_LATEST_SYNC = CompiledQuery(
    lambda job_id: PolicySync.objects.filter(job_id=job_id).order_by("-generation", "-id")[:1], int
)


def latest_sync(job: TrainingJob) -> PolicySync | None:
    found = _LATEST_SYNC(job.pk)
    return found[0] if found else None


def policy_body(job: TrainingJob, warnings: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The current policy of ``job`` with its latest push; warnings re-computed when not given."""
    revision = job.current_revision
    if warnings is None and revision is not None:
        warnings = [
            issue.to_dict() for issue in policy_validate_for_job(job=job, spec=revision.spec).warnings
        ]
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

"""What a job's current incarnation was observed to run with, and the cheap per-job summary lists show.

The parts of the in-effect comparison (``in_effect.py``) that need no rendering: the jobs list and its
sort columns (``listing.py``) read only these.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from apps.jobs.models import JobIncarnation, TrainingJob
from apps.policies.desired import Config, config_changes, config_from_keys, creation_config_of
from apps.policies.models import PolicyRevision
from apps.policies.spec import PolicySpec
from mindcluster import keys as c


def observed_config(incarnation: JobIncarnation) -> tuple[Config | None, str]:
    """The creation config of an incarnation and where it was read; (None, "") if not observed."""
    job_keys = incarnation.job_keys or {}
    if incarnation.init_keys:
        keys, source = _with_podgroup_scheduling(incarnation), "clusterd-init"
    elif incarnation.podgroup_uid:
        keys = incarnation.podgroup_keys
        source = (
            "podgroup-before-first-push" if incarnation.podgroup_seen_by == "push" else "podgroup-at-creation"
        )
    else:
        return None, ""
    labels = dict(keys.get("labels") or {})
    if job_keys.get(c.LABEL_FAULT_RETRY_TIMES) is not None:
        labels[c.LABEL_FAULT_RETRY_TIMES] = str(job_keys[c.LABEL_FAULT_RETRY_TIMES])
    return config_from_keys(labels, dict(keys.get("annotations") or {}), job_keys.get("backoffLimit")), source


def _with_podgroup_scheduling(incarnation: JobIncarnation) -> dict[str, Any]:
    """The Init snapshot, with the PodGroup's own ``fault-scheduling`` where ClusterD cannot tell.

    ClusterD turns grace and force alike into ``job-rescheduling`` (utils.go:114-118); which of the
    two it was matters to Volcano, so the PodGroup's value is kept when both say "on".
    """
    init = incarnation.init_keys or {}
    labels = dict(init.get("labels") or {})
    seen = ((incarnation.podgroup_keys or {}).get("labels") or {}).get(c.LABEL_FAULT_SCHEDULING)
    if labels.get(c.LABEL_FAULT_SCHEDULING) in ("grace", "force") and seen in ("grace", "force"):
        labels[c.LABEL_FAULT_SCHEDULING] = seen
    return {"labels": labels, "annotations": dict(init.get("annotations") or {})}


def stored_spec(revision: PolicyRevision) -> PolicySpec | None:
    """The stored spec (validated when it was stored); None for a shape this version cannot read."""
    try:
        return PolicySpec.from_stored(revision.spec)
    except (TypeError, KeyError, ValueError, AttributeError):
        return None


def process_recovery_on(config: Config) -> bool:
    """Init accepts the job when process-recover-enable is on or subHealthy is hotSwitch (:550-555)."""
    return config.get(c.LABEL_PROCESS_RECOVER_ENABLE) == "on" or (
        config.get(c.LABEL_SUB_HEALTHY_STRATEGY) == "hotSwitch"
    )


def in_effect_briefs(jobs: Sequence[TrainingJob]) -> dict[int, dict[str, Any]]:
    """Per job, a cheap summary for lists: in effect, waiting for a recreation, or unknown.

    One query for the incarnations; only creation configs are compared (no rendering).
    """
    uids = {job.pk: job.uid for job in jobs}
    rows = JobIncarnation.objects.filter(job_id__in=list(uids)).order_by("job_id", "-first_seen_at")
    incarnations = current_incarnations(uids, rows)
    return {job.pk: brief_of(incarnations.get(job.pk), job.current_revision) for job in jobs}


def current_incarnations(uids: dict[int, str], rows: Iterable[Any]) -> dict[int, Any]:
    """Per job id, the row of the job's current uid, else its newest (``rows`` newest first per job)."""
    incarnations: dict[int, Any] = {}
    for row in rows:
        kept = incarnations.get(row.job_id)
        if kept is None or (row.uid == uids[row.job_id] and kept.uid != uids[row.job_id]):
            incarnations[row.job_id] = row
    return incarnations


def brief_of(incarnation: JobIncarnation | None, current: PolicyRevision | None) -> dict[str, Any]:
    """The list summary of one job from its current incarnation and current revision."""
    config = observed_config(incarnation)[0] if incarnation else None
    if config is None:
        return {"state": "unknown", "process_recovery": None, "waits_for": []}
    spec = stored_spec(current) if current is not None else None
    differs = config_changes(config, creation_config_of(spec)) if spec is not None else []
    return {
        "state": "waiting" if differs else "in-effect",
        "process_recovery": process_recovery_on(config),
        "waits_for": ["recreate"] if differs else [],
        "keys": differs,
    }

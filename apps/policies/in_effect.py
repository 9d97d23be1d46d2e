"""What is in effect on a job (design.md §4.4): read from what the cluster was created with.

MindCluster reads most recovery keys once — the operator when it creates the job and its PodGroup,
ClusterD at the job's first ``Init`` (facts §1) — so "written" is not "in effect". This module
compares the config the job's current incarnation was created with (``JobIncarnation``: ClusterD's
Init snapshot where observed, else the PodGroup as first seen) with every revision, and says which
revision that config is, and for each newer revision which keys wait for what.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Case, Value, When

from apps.core.numbers import is_ascii_digits
from apps.jobs.models import JobIncarnation, TrainingJob
from apps.policies.desired import (
    PLATFORM_MODE,
    Config,
    DesiredState,
    artifact_changes,
    config_changes,
    creation_config_of,
    desired_state,
    live_changes,
    podgroup_accepts_init,
)
from apps.policies.in_effect_cache import cached_in_effect
from apps.policies.models import PolicyRevision, PolicySync
from apps.policies.observed import observed_config, process_recovery_on, stored_spec
from apps.policies.rendering.when import BACKOFF_LIMIT_KEY
from mindcluster import keys as c

MAX_PENDING_REVISIONS = 10
WRITTEN_STATES = (PolicySync.State.APPLIED, PolicySync.State.DRIFTED)
PROCESS_OFF_REASON = (
    "process-level recovery is off until the job is recreated: its PodGroup was created without "
    "process-recover-enable=on (the operator sets it only when the job has recover-strategy at creation, "
    "component/ascend-operator/pkg/controllers/v1/job.go:479-491), so ClusterD refuses process-level "
    "recovery at Init (ProcessRecoverEnableOff, component/clusterd/pkg/application/recover/"
    "fault_recover_service.go:550-555). TaskD retries Init every second and ClusterD keeps nothing of a "
    "refusal (component/taskd/taskd/go/framework_backend/manager/manager.go:468-492, "
    "fault_recover_service.go:579-585), so pushed keys stay unread unless the PodGroup also gets "
    "subHealthyStrategy=hotSwitch (or, up to MindCluster 7.1, process-recover-enable=on)"
)
# Said when the current revision is written and its PodGroup keys make the next retried Init accept.
INIT_RETRY_NOTE = (
    "revision {number} is written with keys that make ClusterD accept Init: TaskD retries Init every "
    "second (component/taskd/taskd/go/framework_backend/manager/manager.go:468-492), so ClusterD "
    "snapshots the PodGroup as written at the next retry and this view follows that snapshot once seen"
)


def current_incarnation(job: TrainingJob) -> JobIncarnation | None:
    """The row of the job's current uid, else its newest: one query either way."""
    current_first = Case(When(uid=job.uid, then=Value(0)), default=Value(1)) if job.uid else Value(1)
    return JobIncarnation.objects.filter(job=job).order_by(current_first, "-first_seen_at").first()


def _revision_annotation(incarnation: JobIncarnation) -> int | None:
    """The revision the job carried when it was created (copied by the operator to the PodGroup)."""
    for keys in (incarnation.podgroup_keys, (incarnation.job_keys or {})):
        raw = (keys.get("annotations") or {}).get(c.ANNOTATION_POLICY_REVISION)
        if raw and is_ascii_digits(str(raw)):
            return int(raw)
    return None


def match_revision(
    config: Config, revisions: list[PolicyRevision], hint: int | None
) -> tuple[PolicyRevision | None, bool]:
    """The revision whose creation config is ``config``: the annotated one if it agrees, else the newest."""
    by_number = {r.number: r for r in revisions}
    if hint is not None and hint in by_number:
        spec = stored_spec(by_number[hint])
        if spec is not None and creation_config_of(spec) == config:
            return by_number[hint], True
    for revision in sorted(revisions, key=lambda r: -r.number):
        spec = stored_spec(revision)
        if spec is not None and creation_config_of(spec) == config:
            return revision, False
    return None, False


def in_effect(job: TrainingJob) -> dict[str, Any]:
    """``in_effect`` of design.md §4.4 plus config, observed_from, process_recovery and notes.

    Served from ``in_effect_cache`` when nothing it is derived from has changed; computed otherwise.
    """
    return cached_in_effect(job, in_effect_computed)


def in_effect_computed(job: TrainingJob) -> dict[str, Any]:
    """``in_effect`` computed from the rows, without the cache."""
    incarnation = current_incarnation(job)
    config, observed_from = observed_config(incarnation) if incarnation else (None, "")
    answer: dict[str, Any] = {
        "revision": None,
        "since": None,
        "basis": "unknown",
        "pending": [],
        "config": _config_out(config),
        "observed_from": observed_from or None,
        "process_recovery": None,
        "notes": [],
    }
    current = job.current_revision
    if config is None or incarnation is None:
        answer["notes"].append(
            "not observed yet: the job has no PodGroup we have seen (the operator copies the job's keys "
            "to it when it schedules the job), so what it runs with is unknown"
        )
        if current is not None:
            answer["pending"] = _pending(job, [current], None, None, {})
        return answer
    # Only an observed config is matched against the revisions: read them only then.
    revisions = list(PolicyRevision.objects.filter(job=job).order_by("number"))
    answer["since"] = incarnation.init_at or incarnation.podgroup_created_at or incarnation.job_created_at
    revision, annotated = match_revision(config, revisions, _revision_annotation(incarnation))
    if revision is not None:
        answer["revision"] = revision.number
        answer["basis"] = (
            ("admission" if revision.source == PolicyRevision.Source.ADMISSION else "created-with")
            if annotated
            else "observed"
        )
    else:
        answer["basis"] = "observed"
        answer["notes"].append(
            "the job runs with recovery keys that no revision of its policy has (see config)"
        )
    on = process_recovery_on(config)
    answer["process_recovery"] = {"on": on, "reason": "" if on else PROCESS_OFF_REASON}
    if not on:
        answer["notes"].append(PROCESS_OFF_REASON)
    newer = [r for r in revisions if revision is None or r.number > revision.number]
    if revision is None:
        newer = [current] if current is not None else []
    answer["pending"] = _pending(job, newer[-MAX_PENDING_REVISIONS:], revision, config, {})
    if current is not None and not on:
        _process_off_notes(job, current, answer["notes"])
    return answer


def _process_off_notes(job: TrainingJob, current: PolicyRevision, notes: list[str]) -> None:
    """What the current revision changes for a job whose Init ClusterD refused (D6)."""
    spec = stored_spec(current)
    written = PolicySync.objects.filter(job=job, generation=current.number, state__in=WRITTEN_STATES).exists()
    if spec is not None and written and podgroup_accepts_init(spec):
        notes.append(INIT_RETRY_NOTE.format(number=current.number))
    elif current.spec.get("strategies") or []:
        notes.append(
            f"revision {current.number} configures strategies {', '.join(current.spec['strategies'])}: "
            "they are written to the job but none of them can run until the job is recreated"
        )


def _pending(
    job: TrainingJob,
    revisions: Iterable[PolicyRevision],
    baseline: PolicyRevision | None,
    config: Config | None,
    cache: dict[int, DesiredState | None],
) -> list[dict[str, Any]]:
    from apps.policies.preview import skeleton_manifest

    manifest = skeleton_manifest(job)

    def state(revision: PolicyRevision) -> DesiredState | None:
        if revision.number not in cache:
            spec = stored_spec(revision)
            cache[revision.number] = desired_state(manifest, spec, revision.number) if spec else None
        return cache[revision.number]

    revisions = list(revisions)
    base = state(baseline) if baseline is not None else None
    syncs = PolicySync.objects.filter(
        job=job, state__in=WRITTEN_STATES, generation__in=[r.number for r in revisions]
    )
    written = set(syncs.values_list("generation", flat=True))
    pending: list[dict[str, Any]] = []
    for revision in revisions:
        target = state(revision)
        if target is None:
            continue
        is_written = revision.number in written
        entry = {"revision": revision.number, "written": is_written}
        recreate = config_changes(config or {}, target.creation_config)
        if recreate:
            pending.append({**entry, "keys": recreate, "waits_for": "recreate"})
        live = live_changes(base, target)
        if live:
            # Read at every fault: in effect as soon as it is written.
            pending.append({**entry, "keys": live, "waits_for": "nothing"})
        for when, names in artifact_changes(base, target).items():
            pending.append({**entry, "keys": names, "waits_for": when})
    return pending


def _config_out(config: Config | None) -> dict[str, Any] | None:
    if config is None:
        return None
    out: dict[str, Any] = {k: v for k, v in config.items() if k not in (PLATFORM_MODE, BACKOFF_LIMIT_KEY)}
    out["platform_mode"] = config.get(PLATFORM_MODE) == "on"
    backoff_limit = config.get(BACKOFF_LIMIT_KEY)
    out["backoff_limit"] = int(backoff_limit) if backoff_limit else None
    return out

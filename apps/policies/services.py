"""Writes on policies: new revisions, restores and presets. Every write is validated and audited."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from apps.audit.actors import Actor
from apps.audit.services import audit_record
from apps.core.errors import ValidationFailed
from apps.jobs.models import TrainingJob
from apps.policies.listing import listing_refresh
from apps.policies.models import PolicyRevision, PolicySync, Preset
from apps.policies.spec import JobContext, ReplicaFacts
from apps.policies.syncs import sync_create
from apps.policies.validation import ValidationResult, validate_policy


def job_context(job: TrainingJob) -> JobContext:
    """What the validator knows about a stored job (the live manifest adds more when available)."""
    return JobContext(
        name=job.name,
        namespace=job.namespace,
        framework=job.framework,
        mindcluster_version=job.mindcluster_version,
        replicas=tuple(
            ReplicaFacts(
                role=role,
                replicas=int(count),
                restart_policy="",
                npus_per_pod=job.npus_per_pod,
                container_names=(),
                env_names=(),
            )
            for role, count in job.replicas.items()
        ),
    )


def policy_validate_for_job(*, job: TrainingJob, spec: Any) -> ValidationResult:
    return validate_policy(spec, job_context(job))


def policy_revision_create(
    *,
    job: TrainingJob,
    spec: Any,
    actor: Actor,
    comment: str = "",
    source: str = PolicyRevision.Source.USER,
    preset: Preset | None = None,
    restored_from: int | None = None,
    expected_revision: int | None = None,
    push: bool = True,
) -> PolicyRevision:
    """Validate ``spec`` against the job and store it as the job's next revision.

    Raises ``ValidationFailed`` with the validator's issues, or ``RevisionConflict`` when
    ``expected_revision`` is given and is not the current one (lost-update guard).

    The spec is validated before the job row is locked: the ingester takes that lock for each of
    the job's events, and a large policy must not stall them. Should the job change in between (a
    new release or shape observed), the spec is validated again, under the lock, against the new one.
    """
    from apps.core.errors import RevisionConflict

    context = job_context(job)
    result = policy_validate_for_job(job=job, spec=spec)
    with transaction.atomic():
        locked = TrainingJob.objects.select_for_update().get(pk=job.pk)
        current = locked.current_revision
        if expected_revision is not None and (current.number if current else 0) != expected_revision:
            raise RevisionConflict(current=current.number if current else 0)
        if job_context(locked) != context:
            result = policy_validate_for_job(job=locked, spec=spec)
        if not result.ok or result.spec is None:
            raise ValidationFailed(result.errors, warnings=result.warnings)
        return _store_revision(
            locked=locked,
            job=job,
            result=result,
            current=current,
            actor=actor,
            comment=comment,
            source=source,
            preset=preset,
            restored_from=restored_from,
            push=push,
        )


def _store_revision(
    *,
    locked: TrainingJob,
    job: TrainingJob,
    result: ValidationResult,
    current: PolicyRevision | None,
    actor: Actor,
    comment: str,
    source: str,
    preset: Preset | None,
    restored_from: int | None,
    push: bool,
) -> PolicyRevision:
    """The next revision of ``locked`` (its row locked by the caller), audited, with its sync row."""
    assert result.spec is not None  # the caller refused anything else
    last = locked.revisions.order_by("-number").values_list("number", flat=True).first() or 0
    revision = PolicyRevision.objects.create(
        job=locked,
        number=last + 1,
        spec=result.spec.to_dict(),
        author=actor.account,
        author_name=actor.display_name,
        comment=comment[:500],
        source=source,
        source_preset=preset,
        restored_from=restored_from,
    )
    locked.current_revision = revision
    locked.save(update_fields=["current_revision", "updated_at"])
    listing_refresh([locked.pk])
    audit_record(
        actor=actor,
        action="policy.update" if source != PolicyRevision.Source.RESTORE else "policy.restore",
        obj=locked,
        before=current.spec if current else None,
        after=revision.spec,
    )
    if push:
        # Outbox row in the same transaction; the push task is queued only after commit.
        sync_create(revision=revision)
    else:
        # An observed revision is what the cluster already has: record it as applied.
        PolicySync.objects.create(
            job=locked, revision=revision, generation=revision.number, state=PolicySync.State.APPLIED
        )
    job.current_revision = revision
    return revision


def policy_revision_restore(*, job: TrainingJob, number: int, actor: Actor) -> PolicyRevision:
    """Make a copy of revision ``number`` the job's newest revision."""
    old = job.revisions.get(number=number)
    return policy_revision_create(
        job=job,
        spec=old.spec,
        actor=actor,
        comment=f"restore of revision {number}",
        source=PolicyRevision.Source.RESTORE,
        restored_from=number,
    )


def presets_sync_builtin() -> int:
    """Create or refresh the presets shipped with the product; user presets are left alone.

    The data migration ``policies.0002_builtin_presets`` runs the same loader, so a fresh ``migrate``
    has them; this stays for ``demo_setup`` and for a release whose presets changed without a migration.
    """
    from apps.policies.builtin_presets import builtin_presets_load

    return builtin_presets_load(Preset)

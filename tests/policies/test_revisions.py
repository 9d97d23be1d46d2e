"""Policy revisions: numbered, immutable, validated, audited, guarded against lost updates."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from apps.audit.models import AuditEntry
from apps.core.errors import RevisionConflict, ValidationFailed
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.models import PolicyRevision, Preset
from apps.policies.services import (
    Actor,
    policy_revision_create,
    policy_revision_restore,
    presets_sync_builtin,
)
from tests.support.world import training_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner() -> User:
    return User.objects.create_user("alice", password="pw")


@pytest.fixture
def job() -> TrainingJob:
    return training_job(Cluster.objects.create(name="sim"), "llama", replicas={"Master": 1, "Worker": 3})


def test_revisions_are_numbered_and_point_to_current(job: TrainingJob, owner: User) -> None:
    r1 = policy_revision_create(job=job, spec={"strategies": ["dump", "retry"]}, actor=Actor(user=owner))
    r2 = policy_revision_create(job=job, spec={"strategies": "recover,retry"}, actor=Actor(user=owner))
    job.refresh_from_db()
    assert (r1.number, r2.number) == (1, 2)
    assert job.current_revision == r2
    assert r1.spec["strategies"] == ["retry", "dump"]  # canonical: ClusterD priority order
    assert r2.author_name == "alice"


def test_revision_is_immutable(job: TrainingJob, owner: User) -> None:
    revision = policy_revision_create(job=job, spec={}, actor=Actor(user=owner))
    revision.comment = "edited"
    with pytest.raises(ValueError, match="immutable"):
        revision.save()


def test_invalid_spec_is_refused_and_nothing_is_written(job: TrainingJob, owner: User) -> None:
    with pytest.raises(ValidationFailed) as caught:
        policy_revision_create(job=job, spec={"strategies": ["recovery"]}, actor=Actor(user=owner))
    assert caught.value.issues[0].field.startswith("/strategies")
    assert PolicyRevision.objects.count() == 0
    assert AuditEntry.objects.count() == 0


def test_stale_expected_revision_conflicts(job: TrainingJob, owner: User) -> None:
    policy_revision_create(job=job, spec={}, actor=Actor(user=owner))
    with pytest.raises(RevisionConflict) as caught:
        policy_revision_create(job=job, spec={}, actor=Actor(user=owner), expected_revision=0)
    assert caught.value.current == 1


def test_every_change_is_audited_with_before_and_after(job: TrainingJob, owner: User) -> None:
    policy_revision_create(
        job=job, spec={"strategies": ["dump"]}, actor=Actor(user=owner, request_id="req-1")
    )
    policy_revision_create(job=job, spec={"strategies": ["retry"]}, actor=Actor(user=owner))
    first, second = AuditEntry.objects.order_by("id")
    assert first.before is None and first.after["strategies"] == ["dump"]
    assert first.request_id == "req-1"
    assert second.before["strategies"] == ["dump"] and second.after["strategies"] == ["retry"]
    with pytest.raises(ValueError, match="append-only"):
        second.save()


def test_restore_creates_a_new_revision(job: TrainingJob, owner: User) -> None:
    policy_revision_create(job=job, spec={"strategies": ["dump"]}, actor=Actor(user=owner))
    policy_revision_create(job=job, spec={"strategies": ["retry"]}, actor=Actor(user=owner))
    restored = policy_revision_restore(job=job, number=1, actor=Actor(user=owner))
    assert restored.number == 3
    assert restored.spec["strategies"] == ["dump"]
    assert restored.source == PolicyRevision.Source.RESTORE and restored.restored_from == 1
    assert AuditEntry.objects.filter(action="policy.restore").count() == 1


def test_builtin_presets_load_and_are_valid(owner: User) -> None:
    from apps.policies.validation import validate_policy

    count = presets_sync_builtin()
    assert count == Preset.objects.filter(builtin=True).count() >= 5
    presets_sync_builtin()  # idempotent
    assert Preset.objects.count() == count
    for preset in Preset.objects.all():
        assert validate_policy(preset.spec).ok, preset.name


@pytest.mark.django_db(transaction=True)
def test_the_policy_is_validated_before_the_job_row_is_locked(
    job: TrainingJob, owner: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #24 item 4: the ingester locks the job row for each of its events, so a slow validation
    must not hold that lock. A second connection probes the row while the (real) validator runs."""
    import threading

    from django.db import DatabaseError, connection, transaction

    import apps.policies.services as services

    real_validate = services.policy_validate_for_job
    probes: list[str] = []

    def probe_lock() -> None:
        try:
            with transaction.atomic():
                TrainingJob.objects.select_for_update(nowait=True).get(pk=job.pk)
            probes.append("free")
        except DatabaseError:
            probes.append("locked")
        finally:
            connection.close()

    def validate_and_probe(**kwargs: object) -> object:
        result = real_validate(**kwargs)  # type: ignore[arg-type]
        prober = threading.Thread(target=probe_lock)
        prober.start()
        prober.join()
        return result

    monkeypatch.setattr(services, "policy_validate_for_job", validate_and_probe)
    policy_revision_create(job=job, spec={"strategies": ["retry"]}, actor=Actor(user=owner))
    assert probes and set(probes) == {"free"}, probes


@pytest.mark.django_db(transaction=True)
def test_a_job_that_changes_while_its_policy_is_validated_is_validated_again(
    job: TrainingJob, owner: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validating outside the lock must not let a stale job context through: the job's framework
    changes (another connection) after the first validation; the write re-validates and refuses a
    strategy the new framework does not have."""
    import threading

    from django.db import connection

    import apps.policies.services as services

    real_validate = services.policy_validate_for_job
    calls: list[str] = []

    def downgrade() -> None:
        TrainingJob.objects.filter(pk=job.pk).update(framework="mindspore")
        connection.close()

    def validate_then_change(**kwargs: object) -> object:
        result = real_validate(**kwargs)  # type: ignore[arg-type]
        calls.append(kwargs["job"].framework)  # type: ignore[attr-defined]
        if len(calls) == 1:
            changer = threading.Thread(target=downgrade)
            changer.start()
            changer.join()
        return result

    monkeypatch.setattr(services, "policy_validate_for_job", validate_then_change)
    with pytest.raises(ValidationFailed) as refused:
        policy_revision_create(job=job, spec={"strategies": ["elastic-training"]}, actor=Actor(user=owner))
    assert calls == ["pytorch", "mindspore"]
    assert [issue.code for issue in refused.value.issues] == ["elastic_training_requires_pytorch"]

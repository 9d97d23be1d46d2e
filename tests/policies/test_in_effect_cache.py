"""The in-effect cache (apps/policies/in_effect_cache.py) never serves a stale answer.

Each test reads the view once (stored), changes one of the rows it is derived from the way its
writer does (the ingester's observers, the push, a recreation, a raw UPDATE that fires no signal),
and checks that the next read equals a fresh computation, and differs from the stored one where
the change matters.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.core.cache import cache
from redis.exceptions import RedisError

from apps.audit.actors import Actor
from apps.jobs.incarnations import incarnation_observe_init, incarnation_observe_podgroup
from apps.jobs.models import JobIncarnation, TrainingJob
from apps.policies import in_effect_cache
from apps.policies.in_effect import in_effect, in_effect_computed
from apps.policies.in_effect_cache import cache_key, cached_in_effect, with_rows_fingerprint
from apps.policies.models import PolicySync
from apps.policies.services import policy_revision_create
from mindcluster import keys as c
from tests.support.in_effect import forget_in_effect
from tests.support.world import World, operator_podgroup

ACTOR = Actor(name="test")


def _podgroup(job: TrainingJob, annotations: dict[str, str]) -> dict[str, Any]:
    return operator_podgroup(job, {"fault-scheduling": "grace"}, annotations)


def created_with_revision_1(job: TrainingJob) -> TrainingJob:
    """The job's PodGroup observed as the operator created it from revision 1 (retry,recover,dump)."""
    job.uid = str(uuid.uuid4())
    job.save(update_fields=["uid"])
    annotations = {c.ANNOTATION_RECOVER_STRATEGY: "retry,recover,dump", c.ANNOTATION_POLICY_REVISION: "1"}
    incarnation_observe_podgroup(job, _podgroup(job, annotations), "ingester")
    return job


@pytest.fixture
def job(world: World) -> TrainingJob:
    """Created with revision 1 (retry,recover,dump), then given revision 2 (dump only), not pushed."""
    job = created_with_revision_1(world.job)
    policy_revision_create(
        job=job, spec={"mindcluster_version": "26.1", "strategies": ["dump"]}, actor=ACTOR, push=False
    )
    forget_in_effect(job.pk)
    return fresh(job)


def fresh(job: TrainingJob) -> TrainingJob:
    return TrainingJob.objects.select_related("cluster", "current_revision").get(pk=job.pk)


def counting() -> tuple[list[int], Callable[[TrainingJob], dict[str, Any]]]:
    calls: list[int] = []

    def compute(job: TrainingJob) -> dict[str, Any]:
        calls.append(job.pk)
        return in_effect_computed(job)

    return calls, compute


def test_a_second_read_is_served_from_the_cache(job: TrainingJob) -> None:
    calls, compute = counting()
    first = cached_in_effect(job, compute)
    second = cached_in_effect(fresh(job), compute)
    assert calls == [job.pk]
    assert first == second == in_effect_computed(job)
    assert (first["revision"], first["basis"]) == (1, "created-with")


def _new_revision(job: TrainingJob) -> None:
    policy_revision_create(
        job=job, spec={"mindcluster_version": "26.1", "strategies": ["recover"]}, actor=ACTOR, push=False
    )


def _pushed(job: TrainingJob) -> None:
    # What the push records when it has written revision 2 (the pending entry becomes written).
    revision = job.current_revision
    sync, _ = PolicySync.objects.get_or_create(job=job, generation=2, defaults={"revision": revision})
    sync.state = PolicySync.State.APPLIED
    sync.save()


def _push_undone_by_raw_update(job: TrainingJob) -> None:
    _pushed(job)
    in_effect(fresh(job))  # stored with revision 2 written
    PolicySync.objects.filter(job=job, generation=2).update(state="pending")  # no signal fires


def _init_observed(job: TrainingJob) -> None:
    # ClusterD's Init snapshot: the most direct evidence; observed_from changes.
    keys = {"annotations": {c.ANNOTATION_RECOVER_STRATEGY: "retry,recover,dump"}, "labels": {}}
    incarnation_observe_init(job, job.uid, keys, None)


def _recreated(job: TrainingJob) -> None:
    # A recreation: a new uid whose PodGroup was created with revision 2's keys.
    job.uid = str(uuid.uuid4())
    job.save(update_fields=["uid"])
    annotations = {c.ANNOTATION_RECOVER_STRATEGY: "dump", c.ANNOTATION_POLICY_REVISION: "2"}
    incarnation_observe_podgroup(job, _podgroup(job, annotations), "ingester")


def _incarnation_rewritten_in_place(job: TrainingJob) -> None:
    # A raw UPDATE of the observed keys (no save(), so no updated_at and no signal).
    JobIncarnation.objects.filter(job=job).update(
        podgroup_keys={"labels": {}, "annotations": {c.ANNOTATION_RECOVER_STRATEGY: "dump"}}
    )


def _incarnation_deleted(job: TrainingJob) -> None:
    JobIncarnation.objects.filter(job=job).delete()


def _replicas_changed(job: TrainingJob) -> None:
    TrainingJob.objects.filter(pk=job.pk).update(replicas={"Master": 1, "Worker": 7})


CHANGES = [
    _new_revision,
    _pushed,
    _push_undone_by_raw_update,
    _init_observed,
    _recreated,
    _incarnation_rewritten_in_place,
    _incarnation_deleted,
    _replicas_changed,
]


@pytest.mark.parametrize("change", CHANGES, ids=[f.__name__.strip("_") for f in CHANGES])
def test_every_change_of_what_the_view_reads_is_seen_at_once(
    job: TrainingJob, change: Callable[[TrainingJob], None]
) -> None:
    in_effect(job)  # stored
    key_before = in_effect_cache.fingerprint(fresh(job))
    change(fresh(job))
    job = fresh(job)
    assert in_effect_cache.fingerprint(job) != key_before
    assert in_effect(job) == in_effect_computed(job)


def as_the_endpoints_load_it(job: TrainingJob) -> TrainingJob:
    """The job with its rows fingerprint selected in the same statement (job detail, policy GET)."""
    jobs = TrainingJob.objects.select_related("cluster", "current_revision").filter(pk=job.pk)
    return with_rows_fingerprint(jobs).get()


@pytest.mark.parametrize("change", CHANGES, ids=[f.__name__.strip("_") for f in CHANGES])
def test_the_fingerprint_selected_with_the_job_is_the_one_read_alone(
    job: TrainingJob, change: Callable[[TrainingJob], None]
) -> None:
    before = as_the_endpoints_load_it(job)
    assert in_effect_cache.fingerprint(before) == in_effect_cache.fingerprint(fresh(job))
    change(fresh(job))
    after = as_the_endpoints_load_it(job)
    assert in_effect_cache.fingerprint(after) == in_effect_cache.fingerprint(fresh(job))
    assert in_effect(as_the_endpoints_load_it(job)) == in_effect_computed(fresh(job))


def test_the_selected_fingerprint_is_used_once(job: TrainingJob) -> None:
    """A second fingerprint of the same instance (after the view's reads, or a write) reads again."""
    loaded = as_the_endpoints_load_it(job)
    first = in_effect_cache.fingerprint(loaded)
    _new_revision(fresh(job))
    assert in_effect_cache.fingerprint(loaded) != first


@pytest.mark.parametrize(
    ("change", "what"),
    [
        (_new_revision, lambda v: [p["revision"] for p in v["pending"]]),
        (_push_undone_by_raw_update, lambda v: [p["written"] for p in v["pending"]]),
        (_init_observed, lambda v: v["observed_from"]),
        (_recreated, lambda v: (v["revision"], v["pending"])),
        (_incarnation_deleted, lambda v: v["basis"]),
    ],
    ids=["revision", "push-undone", "init", "recreated", "incarnation-deleted"],
)
def test_the_changes_do_change_the_answer(
    job: TrainingJob, change: Callable[[TrainingJob], None], what: Callable[[dict[str, Any]], Any]
) -> None:
    """The cases above would pass with a cache that is never used; these show the answer moved."""
    before = in_effect(job)
    change(fresh(job))
    assert what(in_effect(fresh(job))) != what(before)


def test_a_new_release_of_the_code_computes_again(job: TrainingJob, monkeypatch: pytest.MonkeyPatch) -> None:
    calls, compute = counting()
    cached_in_effect(job, compute)
    monkeypatch.setattr(in_effect_cache, "CODE_DIGEST", "another-release")
    cached_in_effect(fresh(job), compute)
    assert calls == [job.pk, job.pk]


def test_an_answer_computed_while_a_row_changed_is_not_stored(job: TrainingJob) -> None:
    """Inside a transaction (READ COMMITTED) the rows may move between the fingerprint and the reads."""

    def compute_while_the_push_lands(job: TrainingJob) -> dict[str, Any]:
        view = in_effect_computed(job)
        _pushed(job)
        return view

    cached_in_effect(job, compute_while_the_push_lands)
    assert cache.get(cache_key(job.pk)) is None
    assert in_effect(fresh(job)) == in_effect_computed(fresh(job))


def test_an_unreachable_cache_computes_the_answer(job: TrainingJob, monkeypatch: pytest.MonkeyPatch) -> None:
    def down(*_: Any, **__: Any) -> Any:
        raise RedisError("connection refused")

    monkeypatch.setattr(cache, "get", down)
    monkeypatch.setattr(cache, "set", down)
    calls, compute = counting()
    assert cached_in_effect(job, compute) == in_effect_computed(job)
    assert calls == [job.pk]


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_answer_is_computed_in_one_snapshot(world: World) -> None:
    """The API's path (autocommit): the miss is computed under REPEATABLE READ, then served."""
    job = created_with_revision_1(world.job)
    forget_in_effect(job.pk)
    calls, compute = counting()
    first = cached_in_effect(fresh(job), compute)
    assert cached_in_effect(fresh(job), compute) == first == in_effect_computed(fresh(job))
    assert calls == [job.pk]
    _new_revision(fresh(job))
    assert cached_in_effect(fresh(job), compute) == in_effect_computed(fresh(job))
    assert len(calls) == 2


@pytest.mark.django_db(transaction=True)
def test_the_process_copy_serves_only_the_same_fingerprint(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A view this process served comes back without the shared cache (here: unreachable), as an
    unshared copy, and never once a row it was derived from has changed."""
    job = created_with_revision_1(world.job)
    forget_in_effect(job.pk)
    calls, compute = counting()
    first = cached_in_effect(fresh(job), compute)

    def down(*_: Any, **__: Any) -> Any:
        raise RedisError("connection refused")

    monkeypatch.setattr(cache, "get", down)
    monkeypatch.setattr(cache, "set", down)
    again = cached_in_effect(fresh(job), compute)
    assert again == first and again is not first and calls == [job.pk]
    again["notes"].append("changed by a caller")
    assert cached_in_effect(fresh(job), compute) == first  # the caller's change stayed its own
    _new_revision(fresh(job))
    assert cached_in_effect(fresh(job), compute) == in_effect_computed(fresh(job))
    assert calls == [job.pk, job.pk]

"""The decider's own rules, without a cluster: stale copies, whole rank lists, late answers.

The cluster writes are switched off here (``_after_decided`` is a no-op); the same paths run against
the simulated ClusterD in ``test_platform_real_order.py`` and ``test_platform_fifty_faults.py``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.audit.actors import Actor
from apps.decisions.models import Decision
from apps.decisions.services import decision_observe, decision_open, is_standing, standing_for
from apps.policies.services import policy_revision_create
from tests.support.world import World

pytestmark = pytest.mark.django_db

PLATFORM = {
    "strategies": ["retry", "recover", "dump"],
    "platform_mode": True,
    "decision_rules": [{"match": {"min_ranks": 2}, "strategy": "ask"}],
    "default_strategy": "dump",
    "decision_timeout_s": 120,
}


@pytest.fixture(autouse=True)
def _no_cluster_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("apps.decisions.services._after_decided", lambda decision: None)


def podgroup(world: World, **annotations: str) -> dict[str, object]:
    return {
        "metadata": {
            "name": f"{world.job.name}-{world.job.uid}",
            "namespace": world.job.namespace,
            "annotations": annotations,
        }
    }


def test_the_standing_answer_is_the_policys_default_and_never_empty(world: World) -> None:
    policy_revision_create(job=world.job, spec=PLATFORM, actor=Actor(name="t"), push=False)
    assert standing_for(world.job) == "dump"
    # fault_recover_platform_plugin.go:30-39: what ClusterD accepts before it asks
    values = ("recover", " retry,", "exit", "", None)
    assert [is_standing(v) for v in values] == [True, True, False, False, False]


def test_a_stale_copy_of_the_last_question_is_not_asked_again(world: World) -> None:
    policy_revision_create(job=world.job, spec=PLATFORM, actor=Actor(name="t"), push=False)
    stale = podgroup(
        world,
        ProcessRecoverStrategy="dump",
        ProcessConfirmFault="8:1",
        ProcessResultFault="8:1",  # our answer to it is still there: this copy predates the clearing
        ProcessRecoverStatus="dump-success",
    )
    assert decision_observe(job=world.job, podgroup=stale) is None
    assert not Decision.objects.exists()
    fresh = podgroup(world, ProcessRecoverStrategy="dump", ProcessConfirmFault="8:1")
    opened = decision_observe(job=world.job, podgroup=fresh)
    assert opened is not None and opened.confirm_fault == "8:1"


def test_a_long_rank_list_is_stored_whole(world: World) -> None:
    policy_revision_create(job=world.job, spec=PLATFORM, actor=Actor(name="t"), push=False)
    confirm = ",".join(f"{rank}:1" for rank in range(5000))  # ~34,000 characters
    decision = decision_open(job=world.job, podgroup_name="pg", confirm_fault=confirm)
    assert decision is not None and decision.state == "pending"  # 5000 ranks → the "ask" rule
    stored = Decision.objects.get(pk=decision.pk)
    assert stored.confirm_fault == confirm and len(stored.faults) == 5000


def test_an_answer_after_the_deadline_is_a_409_and_the_default_is_written(world: World) -> None:
    policy_revision_create(job=world.job, spec=PLATFORM, actor=Actor(name="t"), push=False)
    decision = Decision.objects.create(
        job=world.job,
        podgroup="pg",
        confirm_fault="0:1,8:1",
        faults=[{"rank": 0, "type": "1"}, {"rank": 8, "type": "1"}],
        state=Decision.State.PENDING,
        deadline_at=timezone.now() - timedelta(seconds=1),  # nobody expired it yet
    )
    client = world.client("owner")
    answer = client.post(f"/api/v1/decisions/{decision.pk}/", {"strategy": "retry"}, format="json")
    assert answer.status_code == 409, answer.json()
    error = answer.json()["errors"][0]
    assert error["code"] == "decision_closed" and error["field"] == "strategy"
    assert "too late" in error["message"] and "dump" in error["message"]
    decision.refresh_from_db()
    assert (decision.state, decision.strategy, decision.decided_by) == ("decided", "dump", "default:deadline")
    assert decision.answered_by is None


@pytest.mark.parametrize(
    ("standing", "confirm", "retry_allowed"),
    [
        ("retry", "0:0,8:2", True),  # retry path: standing retry and only UCE/HCCL faults
        ("recover", "0:0,8:0", False),  # sorted onto the normal path before ClusterD asked
        ("retry", "0:0,8:1", False),  # a normal fault among them: firstChooseStrategy never retries
    ],
)
def test_retry_is_offered_only_where_clusterd_can_still_use_it(
    world: World, standing: str, confirm: str, retry_allowed: bool
) -> None:
    # controller.go:364-370 (supportRetryStrategy reads the standing answer), :1006 (faults sorted
    # before ProcessConfirmFault is written), :1096-1101 (retry needs no normal fault)
    policy_revision_create(
        job=world.job, spec={**PLATFORM, "default_strategy": "retry"}, actor=Actor(name="t"), push=False
    )
    question = podgroup(world, ProcessRecoverStrategy=standing, ProcessConfirmFault=confirm)
    decision = decision_observe(job=world.job, podgroup=question)
    assert decision is not None and decision.state == "pending"  # two ranks → the "ask" rule
    client = world.client("owner")
    allowed = client.get(f"/api/v1/decisions/{decision.pk}/").json()["allowed"]
    assert ("retry" in allowed) is retry_allowed
    if not retry_allowed:
        answer = client.post(f"/api/v1/decisions/{decision.pk}/", {"strategy": "retry"}, format="json")
        assert answer.status_code == 400, answer.json()
        error = answer.json()["errors"][0]
        assert error["code"] == "invalid_choice" and error["field"] == "strategy"
        assert error["allowed"] == allowed

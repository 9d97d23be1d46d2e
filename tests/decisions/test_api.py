"""The decisions inbox and the what-if endpoint: permissions, answers, errors."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.audit.actors import Actor
from apps.decisions.models import Decision
from apps.policies.services import policy_revision_create
from tests.support.world import World

pytestmark = pytest.mark.django_db

PLATFORM = {
    "strategies": ["retry", "recover", "dump"],
    "platform_mode": True,
    "decision_rules": [{"match": {"rank0": True}, "strategy": "ask"}],
    "default_strategy": "recover",
    "decision_timeout_s": 120,
}


def pending_decision(world: World) -> Decision:
    policy_revision_create(job=world.job, spec=PLATFORM, actor=Actor(name="t"), push=False)
    return Decision.objects.create(
        job=world.job,
        podgroup=f"{world.job.name}-uid",
        confirm_fault="0:1",
        faults=[{"rank": 0, "type": "1"}],
        state=Decision.State.PENDING,
        deadline_at=timezone.now() + timedelta(seconds=120),
    )


@pytest.mark.parametrize(
    ("persona", "list_count", "get_status", "answer_status"),
    [("owner", 1, 200, 200), ("teammate", 1, 200, 403), ("outsider", 0, 404, 404), ("admin", 1, 200, 200)],
)
def test_inbox_permission_matrix(
    world: World,
    persona: str,
    list_count: int,
    get_status: int,
    answer_status: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decision = pending_decision(world)
    # The answer is written to the cluster by the service after commit; that path is tested against
    # the simulated ClusterD in test_platform_mode.py. Here only the API's decision about access matters.
    monkeypatch.setattr("apps.decisions.services._after_decided", lambda decision: None)
    client = world.client(persona)
    listing = client.get("/api/v1/decisions/?state=pending").json()
    assert listing["count"] == list_count
    assert client.get(f"/api/v1/decisions/{decision.pk}/").status_code == get_status
    answer = client.post(f"/api/v1/decisions/{decision.pk}/", {"strategy": "dump"}, format="json")
    assert answer.status_code == answer_status, answer.json()
    if answer_status == 200:
        body = answer.json()
        assert body["state"] == "decided" and body["strategy"] == "dump"
        assert body["decided_by"] == f"user:{world.users[persona].username}"


def test_answers_are_checked_and_a_closed_question_is_a_conflict(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("apps.decisions.services._after_decided", lambda decision: None)
    decision = pending_decision(world)
    client = world.client("owner")
    assert client.get(f"/api/v1/decisions/{decision.pk}/").json()["allowed"] == [
        "retry",
        "recover",
        "dump",
        "exit",
    ]
    bad = client.post(f"/api/v1/decisions/{decision.pk}/", {"strategy": "recover-in-place"}, format="json")
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["field"] == "strategy"
    assert (
        client.post(f"/api/v1/decisions/{decision.pk}/", {"strategy": "retry"}, format="json").status_code
        == 200
    )
    again = client.post(f"/api/v1/decisions/{decision.pk}/", {"strategy": "dump"}, format="json")
    assert again.status_code == 409
    assert again.json()["errors"][0]["code"] == "decision_closed"
    unknown = client.get("/api/v1/decisions/?state=maybe")
    assert unknown.status_code == 400 and "pending" in unknown.json()["errors"][0]["allowed"]


def test_simulate_a_draft_step_by_step(world: World) -> None:
    client = world.client("outsider")  # a draft needs no job: anyone signed in may rehearse
    body = client.post(
        "/api/v1/policies/simulate/",
        {
            "spec": {
                "strategies": ["retry", "recover", "dump"],
                "pod_rescheduling": True,
                "backoff_limit": 5,
            },
            "pods": 4,
            "npus_per_pod": 8,
            "faults": [
                {"type": "uce", "ranks": [9]},
                {"type": "normal", "ranks": [17], "attempts": [False, False]},
            ],
        },
        format="json",
    )
    assert body.status_code == 200, body.json()
    result = body.json()
    first, second = result["faults"]
    assert first["strategies"] == ["retry"] and first["outcome"] == "recovered-by-retry"
    # Issue 13: after dump ClusterD sends dump-exit and waits for Volcano; no exit choice, no pause
    # (controller.go:1446-1458).
    assert second["strategies"] == ["recover", "dump"]
    assert second["outcome"] == "pod-rescheduled"
    assert any(step["extra_params"] == "dump_exit" for step in second["steps"])
    assert all(step["reason"] for step in second["steps"])
    assert result["end_state"] == {**result["end_state"], "reschedules_used": 1, "reschedules_left": 4}


def test_simulate_a_jobs_current_policy_and_refuse_bad_input(world: World) -> None:
    policy_revision_create(job=world.job, spec={"strategies": ["recover"]}, actor=Actor(name="t"), push=False)
    client = world.client("teammate")
    ok = client.post(
        "/api/v1/policies/simulate/",
        {"job": world.job.pk, "faults": [{"type": "node", "ranks": [0]}]},
        format="json",
    )
    assert ok.status_code == 200, ok.json()
    assert (
        world.client("outsider")
        .post("/api/v1/policies/simulate/", {"job": world.job.pk, "faults": [{"ranks": [0]}]}, format="json")
        .status_code
        == 404
    )
    invalid_policy = client.post(
        "/api/v1/policies/simulate/",
        {"spec": {"strategies": ["recovery"]}, "faults": [{"ranks": [0]}]},
        format="json",
    )
    assert invalid_policy.status_code == 400
    assert invalid_policy.json()["errors"][0]["code"] == "unknown_strategy"
    bad_fault = client.post(
        "/api/v1/policies/simulate/",
        {"spec": {}, "faults": [{"type": "cosmic-ray", "ranks": [0]}]},
        format="json",
    )
    assert bad_fault.status_code == 400
    assert "uce" in bad_fault.json()["errors"][0]["allowed"]
    out_of_job = client.post(
        "/api/v1/policies/simulate/",
        {"spec": {}, "pods": 1, "npus_per_pod": 8, "faults": [{"ranks": [99]}]},
        format="json",
    )
    assert out_of_job.status_code == 400

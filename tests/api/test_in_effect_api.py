"""``in_effect`` on the job and policy endpoints, and the what-if from the job's real state."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from apps.audit.actors import Actor
from apps.jobs.incarnations import incarnation_observe_podgroup
from apps.jobs.models import TrainingJob
from apps.policies.services import policy_revision_create
from mindcluster import keys as c
from tests.support.world import World

pytestmark = pytest.mark.django_db


def created_podgroup(job: TrainingJob, annotations: dict[str, str]) -> dict[str, Any]:
    labels = {"fault-scheduling": "grace"}
    if c.ANNOTATION_RECOVER_STRATEGY in annotations:
        labels[c.LABEL_PROCESS_RECOVER_ENABLE] = "on"
    return {
        "metadata": {
            "name": f"{job.name}-{job.uid}",
            "uid": str(uuid.uuid4()),
            "creationTimestamp": "2026-08-21T10:00:00Z",
            "labels": labels,
            "annotations": annotations,
        }
    }


@pytest.fixture
def running(world: World) -> TrainingJob:
    """The world's job (revision 1: retry,recover,dump), created with revision 1, then given revision 2."""
    job = world.job
    job.uid = str(uuid.uuid4())
    job.save(update_fields=["uid"])
    incarnation_observe_podgroup(
        job,
        created_podgroup(job, {"recover-strategy": "retry,recover,dump", c.ANNOTATION_POLICY_REVISION: "1"}),
        "ingester",
    )
    policy_revision_create(
        job=job,
        spec={"mindcluster_version": "26.1", "strategies": ["dump"]},
        actor=Actor(name="t"),
        push=False,
    )
    return job


def test_job_detail_and_policy_carry_in_effect(world: World, running: TrainingJob) -> None:
    client = world.client("teammate")
    detail = client.get(f"/api/v1/jobs/{running.pk}/").json()
    policy = client.get(f"/api/v1/jobs/{running.pk}/policy/").json()
    for body in (detail["in_effect"], policy["in_effect"]):
        assert (body["revision"], body["basis"]) == (1, "created-with")
        assert {"revision", "since", "basis", "pending"} <= set(body)
        recreate = [p for p in body["pending"] if p["waits_for"] == "recreate"]
        assert recreate == [
            {"revision": 2, "keys": ["recover-strategy"], "waits_for": "recreate", "written": True}
        ]
    assert policy["revision"] == 2  # the current revision is what was written, not what is in effect
    listing = client.get("/api/v1/jobs/").json()["results"]
    assert all("in_effect" not in row for row in listing)  # lists stay cheap


def test_simulate_starts_from_the_in_effect_config_unless_after_recreation(
    world: World, running: TrainingJob
) -> None:
    client = world.client("teammate")
    faults = [{"type": "uce", "ranks": [1]}]
    now = client.post(
        "/api/v1/policies/simulate/", {"job": running.pk, "faults": faults}, format="json"
    ).json()
    assert now["start"]["as"] == "in-effect" and now["start"]["revision"] == 1
    assert now["faults"][0]["outcome"] == "recovered-by-retry"  # retry is still what ClusterD holds
    later = client.post(
        "/api/v1/policies/simulate/",
        {"job": running.pk, "faults": faults, "as": "after-recreation"},
        format="json",
    ).json()
    assert later["start"]["as"] == "after-recreation"
    assert "retry" not in later["faults"][0]["strategies"]  # revision 2: dump only
    bad = client.post(
        "/api/v1/policies/simulate/", {"spec": {}, "faults": faults, "as": "in-effect"}, format="json"
    )
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "as"
    wrong = client.post(
        "/api/v1/policies/simulate/", {"job": running.pk, "faults": faults, "as": "later"}, format="json"
    )
    assert wrong.status_code == 400 and wrong.json()["errors"][0]["field"] == "as"


def test_preview_lists_every_key_with_when_it_takes_effect(world: World, running: TrainingJob) -> None:
    body = {"spec": {"mindcluster_version": "26.1", "strategies": ["recover"], "backoff_limit": 4}}
    answer = (
        world.client("owner").post(f"/api/v1/jobs/{running.pk}/policy/preview/", body, format="json").json()
    )
    whens = {(k["section"], k["key"]): k["when"] for k in answer["keys"]}
    assert whens["annotations", "recover-strategy"] == "recreate"
    assert whens["annotations", "wait-reschedule-timeout"] == "live"
    assert whens["spec", "runPolicy.backoffLimit"] == "recreate"
    assert {e["when"] for e in answer["render"]["effects"]} >= {"recreate", "live", "pod-restart"}

"""The job policy endpoints: read, change with lost-update guard, preview, apply, history, restore, sync."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apps.audit.models import AuditEntry
from apps.jobs.models import TrainingJob
from apps.policies.models import PolicyRevision, PolicySync
from apps.policies.services import job_context
from apps.policies.validation import validate_policy
from tests.support.world import World

pytestmark = pytest.mark.django_db


def policy_url(world: World, suffix: str = "") -> str:
    return f"/api/v1/jobs/{world.job.pk}/policy/{suffix}"


def test_get_returns_the_current_revision_with_an_etag_and_its_sync(world: World) -> None:
    response = world.client("teammate").get(policy_url(world))
    assert response.status_code == 200
    body = response.json()
    assert response["ETag"] == '"1"'
    assert body["revision"] == 1 and body["spec"]["strategies"] == ["retry", "recover", "dump"]
    assert body["sync"]["revision"] == 1 and body["sync"]["state"] == "pending"


def test_put_creates_a_revision_audited_with_token_name_and_request_id(world: World) -> None:
    response = world.client("owner").put(
        policy_url(world),
        {"spec": {"strategies": ["dump"]}, "comment": "dump only"},
        format="json",
        HTTP_IF_MATCH='"1"',
        HTTP_X_REQUEST_ID="ci-run-42",
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["revision"] == 2 and response["ETag"] == '"2"'
    assert body["comment"] == "dump only" and body["author"] == "owner"
    assert body["sync"]["revision"] == 2
    entry = AuditEntry.objects.filter(action="policy.update").latest("id")
    # Issue #16: the stored id is the server's (a client's X-Request-ID only counts from a trusted proxy).
    assert (entry.actor_name, entry.token_name) == ("owner", "owner-ci")
    assert entry.request_id == response["X-Request-ID"] != "ci-run-42"
    assert entry.before["strategies"] == ["retry", "recover", "dump"] and entry.after["strategies"] == [
        "dump"
    ]


@pytest.mark.parametrize("guard", [{"HTTP_IF_MATCH": '"0"'}, {"HTTP_IF_MATCH": 'W/"7"'}, {"revision": 3}])
def test_a_stale_revision_is_a_409_with_the_current_one(world: World, guard: dict) -> None:
    body: dict = {"spec": {"strategies": ["dump"]}}
    headers = {k: v for k, v in guard.items() if k.startswith("HTTP_")}
    body.update({k: v for k, v in guard.items() if not k.startswith("HTTP_")})
    response = world.client("owner").put(policy_url(world), body, format="json", **headers)
    assert response.status_code == 409
    assert response.json()["current_revision"] == 1
    assert response.json()["errors"][0]["code"] == "revision_conflict"
    assert PolicyRevision.objects.filter(job=world.job).count() == 1


def test_if_match_and_body_revision_must_agree(world: World) -> None:
    response = world.client("owner").put(
        policy_url(world), {"spec": {}, "revision": 1}, format="json", HTTP_IF_MATCH='"2"'
    )
    assert response.status_code == 400
    assert response.json()["errors"][0] | {"message": ""} == {
        "code": "conflicting_fields",
        "field": "revision",
        "message": "",
    }


def test_invalid_policy_errors_are_the_validators_word_for_word(world: World) -> None:
    spec = {"strategies": ["Retry", "recover"], "ttp_port": 80, "wat": True}
    response = world.client("owner").put(policy_url(world), {"spec": spec}, format="json")
    assert response.status_code == 400
    expected = validate_policy({**spec, "mindcluster_version": "26.1"}, job_context(world.job)).to_dict()
    assert response.json()["errors"] == expected["errors"]
    assert {e["code"] for e in response.json()["errors"]} >= {
        "strategy_wrong_case",
        "out_of_range",
        "unknown_field",
    }


def test_put_from_a_preset_records_the_preset(world: World) -> None:
    response = world.client("owner").put(policy_url(world), {"preset": "dying-gasp"}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["source"] == "preset"
    assert PolicyRevision.objects.get(job=world.job, number=2).source_preset.name == "dying-gasp"


def test_preview_writes_nothing_and_reports_an_unreachable_cluster(world: World) -> None:
    counts = (PolicyRevision.objects.count(), PolicySync.objects.count(), AuditEntry.objects.count())
    response = world.client("teammate").post(
        policy_url(world, "preview/"), {"spec": {"strategies": ["recover"]}}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    assert body["valid"] is True and body["live"]["available"] is False
    assert body["live"]["reason"] == "unreachable" and "kubeconfig" in body["live"]["message"]
    assert body["render"]["annotations"]["recover-strategy"] == "recover"
    assert "launcher.sh" in body["render"]["artifacts"] and body["diff"] is None
    assert counts == (PolicyRevision.objects.count(), PolicySync.objects.count(), AuditEntry.objects.count())


def test_preview_without_a_body_previews_the_current_revision(world: World) -> None:
    response = world.client("owner").post(policy_url(world, "preview/"))
    assert response.status_code == 200
    assert response.json()["spec"]["strategies"] == ["retry", "recover", "dump"]


def test_preview_of_an_invalid_draft_is_data_not_an_error(world: World) -> None:
    body = (
        world.client("owner")
        .post(policy_url(world, "preview/"), {"spec": {"strategies": "x"}}, format="json")
        .json()
    )
    assert (
        body["valid"] is False and body["render"] is None and body["errors"][0]["code"] == "unknown_strategy"
    )


def test_apply_answers_202_with_the_sync_record(world: World) -> None:
    response = world.client("owner").post(policy_url(world, "apply/"))
    assert response.status_code == 202
    assert response.json()["revision"] == 1 and response.json()["state"] == "pending"


def test_apply_without_a_policy_is_a_409(world: World) -> None:
    world.job.current_revision = None
    world.job.save()
    response = world.client("owner").post(policy_url(world, "apply/"))
    assert response.status_code == 409 and response.json()["errors"][0]["code"] == "no_policy"


def test_revisions_carry_author_source_and_a_diff_to_the_previous(world: World) -> None:
    client = world.client("owner")
    client.put(policy_url(world), {"spec": {"strategies": ["dump"], "ttp_port": 8100}}, format="json")
    revisions = client.get(policy_url(world, "revisions/")).json()["results"]
    assert [r["number"] for r in revisions] == [2, 1]
    assert revisions[0]["diff"] == {"strategies": ["dump"], "ttp_port": 8100}
    assert revisions[1]["diff"] is None and revisions[0]["author"] == "owner"


def test_restore_makes_a_new_revision_from_an_old_one(world: World) -> None:
    client = world.client("owner")
    client.put(policy_url(world), {"spec": {"strategies": ["dump"]}}, format="json")
    response = client.post(policy_url(world, "revisions/1/restore/"))
    assert response.status_code == 201
    revision = response.json()["revision"]
    assert (revision["number"], revision["source"], revision["restored_from"]) == (3, "restore", 1)
    assert revision["diff"] == {"strategies": ["retry", "recover", "dump"]}
    assert response.json()["sync"]["revision"] == 3
    assert client.post(policy_url(world, "revisions/99/restore/")).status_code == 404


def test_sync_shows_the_latest_push(world: World) -> None:
    body = world.client("teammate").get(f"/api/v1/jobs/{world.job.pk}/sync/").json()
    assert {
        "revision",
        "state",
        "attempts",
        "last_error",
        "applied_resource_versions",
        "drift",
        "effects",
        "queued_at",
        "started_at",
        "finished_at",
        "duration_ms",
    } <= set(body)


def test_sync_of_a_job_never_pushed_is_a_404(world: World) -> None:
    PolicySync.objects.all().delete()
    response = world.client("owner").get(f"/api/v1/jobs/{world.job.pk}/sync/")
    assert response.status_code == 404 and "never been pushed" in response.json()["errors"][0]["message"]


def test_the_warnings_kept_per_revision_are_the_validators_for_the_jobs_facts_now(world: World) -> None:
    from apps.api.policies.bodies import revision_warnings

    job = world.job
    revision = job.current_revision
    assert revision is not None

    def validator(spec: object) -> list[dict[str, object]]:
        return [issue.to_dict() for issue in validate_policy(spec, job_context(job)).warnings]

    first = revision_warnings(job, revision)
    assert first == validator(revision.spec)
    first.append({"code": "scribbled"})  # a caller's change to its copy is not kept
    assert revision_warnings(job, revision) == validator(revision.spec)
    # Other facts (a Worker count the policy's rules may not fit): validated again, not the kept ones.
    job.replicas = {**job.replicas, "Worker": 7}
    assert revision_warnings(job, revision) == validator(revision.spec)
    response = world.client("teammate").get(policy_url(world))
    job.refresh_from_db()
    assert response.json()["warnings"] == validator(revision.spec)


def test_jobs_alike_share_the_warnings_kept_for_their_spec(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kept per (spec, facts): another job with the same spec and facts (another name, namespace and
    revision) is not validated again; one with other facts is."""
    from apps.api.policies import bodies

    job = world.job
    revision = job.current_revision
    assert revision is not None
    bodies._warnings.clear()
    calls: list[int] = []
    real = bodies.policy_validate_for_job

    def counted(**kwargs: Any) -> Any:
        calls.append(kwargs["job"].pk)
        return real(**kwargs)

    monkeypatch.setattr(bodies, "policy_validate_for_job", counted)
    first = bodies.revision_warnings(job, revision)
    twin = TrainingJob(
        pk=job.pk + 1000,
        name="another-name",
        namespace="another-namespace",
        framework=job.framework,
        mindcluster_version=job.mindcluster_version,
        replicas=dict(job.replicas),
        npus_per_pod=job.npus_per_pod,
    )
    copied = PolicyRevision(pk=revision.pk + 1000, spec=json.loads(json.dumps(revision.spec)))
    assert bodies.revision_warnings(twin, copied) == first
    assert calls == [job.pk]
    twin.npus_per_pod = job.npus_per_pod + 1
    bodies.revision_warnings(twin, copied)
    assert calls == [job.pk, twin.pk]

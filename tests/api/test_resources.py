"""Jobs (register, filter), presets (validated, built-ins read-only), events (seq order, keyset pages)."""

from __future__ import annotations

from typing import Any

import pytest

from apps.audit.models import AuditEntry
from apps.events.services import event_record
from apps.policies.models import Preset
from tests.support.world import JOB_REGISTRATION, World, training_job

pytestmark = pytest.mark.django_db

REGISTER = JOB_REGISTRATION


def test_register_a_job_is_audited(world: World) -> None:
    response = world.client("owner").post("/api/v1/jobs/", REGISTER, format="json")
    assert response.status_code == 201, response.json()
    job = response.json()
    assert (job["name"], job["source"], job["current_revision"]) == ("gpt-small", "registered", None)
    entry = AuditEntry.objects.get(action="job.register")
    assert entry.token_name == "owner-ci" and entry.after["replicas"] == {"Master": 1, "Worker": 3}


def test_registering_twice_is_a_409(world: World) -> None:
    client = world.client("owner")
    client.post("/api/v1/jobs/", REGISTER, format="json")
    response = client.post("/api/v1/jobs/", REGISTER, format="json")
    assert response.status_code == 409 and response.json()["errors"][0]["code"] == "already_registered"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"replicas": {"Master": 2}}, "replicas.Master"),
        ({"replicas": {"Chief": 1}}, "replicas.Chief"),
        ({"name": "Not_A_Label"}, "name"),
        ({"framework": "jax"}, "framework"),
        ({"cluster": "elsewhere"}, "cluster"),
        ({"mindcluster_version": "8.0"}, "mindcluster_version"),
        ({"replicas": {}}, "replicas"),
    ],
)
def test_register_names_the_bad_field(world: World, change: dict[str, Any], field: str) -> None:
    response = world.client("owner").post("/api/v1/jobs/", {**REGISTER, **change}, format="json")
    assert response.status_code == 400
    assert field in {e["field"] for e in response.json()["errors"]}


def test_job_filters(world: World, superuser_client: Any) -> None:
    training_job(world.cluster, "bert")
    world.job.phase = "Running"
    world.job.save()

    def names(query: str) -> list[str]:
        return [j["name"] for j in superuser_client.get(f"/api/v1/jobs/?{query}").json()["results"]]

    assert names("namespace=team-a") == ["bert", "llama"]
    assert names("phase=Running") == ["llama"]
    assert names("q=ecr") == ["secret"]
    assert names(f"cluster={world.cluster.pk}") == names("cluster=sim") == ["bert", "llama", "secret"]
    assert names("cluster=nowhere") == []


def test_presets_are_validated_with_the_validators_codes(world: World) -> None:
    response = world.client("owner").post(
        "/api/v1/presets/",
        {"name": "broken", "cluster": "sim", "namespace": "team-a", "spec": {"strategies": ["nope"]}},
        format="json",
    )
    assert response.status_code == 400 and response.json()["errors"][0]["code"] == "unknown_strategy"


def test_preset_lifecycle_is_audited(world: World) -> None:
    client = world.client("owner")
    scope = {"cluster": "sim", "namespace": "team-a"}
    created = client.post(
        "/api/v1/presets/", {"name": "mine", **scope, "spec": {"strategies": ["dump"]}}, format="json"
    )
    assert created.status_code == 201 and created.json()["created_by"] == "owner"
    path = created.json()["url"]
    assert path == "/api/v1/clusters/sim/namespaces/team-a/presets/mine/"
    again = client.post("/api/v1/presets/", {"name": "mine", **scope, "spec": {}}, format="json")
    assert again.status_code == 409
    updated = client.put(path, {"description": "d", "spec": {"strategies": []}}, format="json")
    assert updated.json()["spec"] == {"strategies": []}
    renamed = client.put(path, {"name": "other", "spec": {}}, format="json")
    assert renamed.status_code == 400 and renamed.json()["errors"][0]["field"] == "name"
    assert client.delete(path).status_code == 204
    assert list(
        AuditEntry.objects.filter(object_type="policies.preset")
        .values_list("action", flat=True)
        .order_by("id")
    ) == ["preset.create", "preset.update", "preset.delete"]


def test_builtin_presets_are_read_only_with_a_clear_message(world: World, superuser_client: Any) -> None:
    response = superuser_client.delete("/api/v1/presets/retry-first/")
    assert response.status_code == 403
    error = response.json()["errors"][0]
    assert error["code"] == "builtin_preset_read_only" and "built-in" in error["message"]
    assert Preset.objects.filter(name="retry-first").exists()


def test_job_events_in_seq_order_with_keyset_pages_and_kind_filter(world: World) -> None:
    for i in range(5):
        event_record(
            job=world.job,
            kind="fault.detected" if i % 2 else "policy.applied",
            message=f"e{i}",
            source="test",
        )
    client = world.client("teammate")
    url = f"/api/v1/jobs/{world.job.pk}/events/"
    first = client.get(f"{url}?limit=2").json()
    assert [e["seq"] for e in first["results"]] == [1, 2] and first["last_seq"] == 2
    second = client.get(first["next"]).json()
    assert [e["seq"] for e in second["results"]] == [3, 4]
    assert [e["seq"] for e in client.get(f"{url}?after_seq=4").json()["results"]] == [5]
    assert client.get(f"{url}?after_seq=4").json()["next"] is None
    assert [e["seq"] for e in client.get(f"{url}?kind=fault.*").json()["results"]] == [2, 4]
    assert [e["seq"] for e in client.get(f"{url}?kind=policy.applied,nope").json()["results"]] == [1, 3, 5]


def test_all_events_only_of_visible_jobs(world: World) -> None:
    event_record(job=world.job, kind="fault.detected", message="mine", source="test")
    event_record(job=world.other_job, kind="fault.detected", message="not mine", source="test")
    events = world.client("owner").get("/api/v1/events/").json()["results"]
    assert [e["message"] for e in events] == ["mine"]
    assert world.client("outsider").get("/api/v1/events/").json()["results"] == []

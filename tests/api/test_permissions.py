"""Permission matrix: persona x endpoint x method → status, over every endpoint of the API.

A job a persona may not see answers 404; one it may see but not change answers 403.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from apps.accounts.services import token_issue
from apps.events.models import Webhook
from apps.policies.models import Preset
from tests.support.world import MANIFEST, NAMESPACE, PERSONAS, World

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    path: Callable[[World, str], str]
    expected: dict[str, int]  # persona -> status
    body: Callable[[World, str], Any] = lambda world, persona: None


def everyone(status: int) -> dict[str, int]:
    return dict.fromkeys(PERSONAS, status)


def job_scoped(read: bool) -> dict[str, int]:
    """Viewer-level reads (200) or editor-level writes on the job (teammate 403); outsider 404 always."""
    return {"owner": 200, "teammate": 200 if read else 403, "outsider": 404, "admin": 200}


def with_status(table: dict[str, int], ok: int) -> dict[str, int]:
    return {persona: ok if status == 200 else status for persona, status in table.items()}


def job_path(suffix: str = "") -> Callable[[World, str], str]:
    return lambda world, persona: f"/api/v1/jobs/{world.job.pk}/{suffix}"


def new_preset(world: World, persona: str) -> str:
    preset = Preset.objects.create(
        name=f"tmp-{persona}", spec={"strategies": []}, created_by=world.users["owner"]
    )
    return f"/api/v1/presets/{preset.name}/"


def namespace_preset(world: World, persona: str) -> str:
    """A preset of team-a (cluster sim), made by someone else than the persona."""
    preset = Preset.objects.create(
        name=f"ns-{persona}", cluster=world.cluster, namespace=NAMESPACE, spec={"strategies": []}
    )
    return f"/api/v1/clusters/{world.cluster.name}/namespaces/{NAMESPACE}/presets/{preset.name}/"


def team_webhook(world: World, persona: str) -> str:
    """A webhook for team-a of cluster sim: its admins (and superusers) manage it, nobody else sees it."""
    hook = Webhook.objects.create(
        name=f"hook-{persona}",
        cluster=world.cluster,
        namespace=NAMESPACE,
        url="https://hooks.example.com/x",
        secret="0123456789abcdef",
    )
    return f"/api/v1/webhooks/{hook.pk}/"


def admin_only(ok: int) -> dict[str, int]:
    return {"owner": 403, "teammate": 403, "outsider": 403, "admin": ok}


def own_token(world: World, persona: str) -> str:
    token, _ = token_issue(world.users[persona], "to-revoke")
    return f"/api/v1/tokens/{token.pk}/"


def foreign_token(world: World, persona: str) -> str:
    other = "admin" if persona != "admin" else "owner"
    token, _ = token_issue(world.users[other], "not-yours")
    return f"/api/v1/tokens/{token.pk}/"


CASES = [
    Case("clusters", "get", lambda w, p: "/api/v1/clusters/", everyone(200)),
    Case("jobs list", "get", lambda w, p: "/api/v1/jobs/", everyone(200)),
    Case(
        "jobs register",
        "post",
        lambda w, p: "/api/v1/jobs/",
        {"owner": 201, "teammate": 403, "outsider": 400, "admin": 201},
        body=lambda w, p: {
            "cluster": "sim",
            "namespace": NAMESPACE,
            "name": f"new-{p}",
            "framework": "pytorch",
            "replicas": {"Master": 1, "Worker": 2},
            "npus_per_pod": 8,
            "mindcluster_version": "26.1",
        },
    ),
    Case("job detail", "get", job_path(), job_scoped(read=True)),
    Case("policy get", "get", job_path("policy/"), job_scoped(read=True)),
    Case(
        "policy put",
        "put",
        job_path("policy/"),
        job_scoped(read=False),
        body=lambda w, p: {"spec": {"strategies": ["recover"]}, "comment": f"by {p}"},
    ),
    Case(
        "policy preview",
        "post",
        job_path("policy/preview/"),
        job_scoped(read=True),
        body=lambda w, p: {"spec": {"strategies": ["dump"]}},
    ),
    Case("policy apply", "post", job_path("policy/apply/"), with_status(job_scoped(read=False), 202)),
    Case("revisions", "get", job_path("policy/revisions/"), job_scoped(read=True)),
    Case(
        "restore", "post", job_path("policy/revisions/1/restore/"), with_status(job_scoped(read=False), 201)
    ),
    Case("sync", "get", job_path("sync/"), job_scoped(read=True)),
    Case("job events", "get", job_path("events/"), job_scoped(read=True)),
    Case("events", "get", lambda w, p: "/api/v1/events/", everyone(200)),
    Case(
        "validate",
        "post",
        lambda w, p: "/api/v1/policies/validate/",
        everyone(200),
        body=lambda w, p: {"spec": {"strategies": ["retry"]}},
    ),
    Case(
        "render",
        "post",
        lambda w, p: "/api/v1/render/",
        everyone(200),
        body=lambda w, p: {"manifest": MANIFEST, "preset": "retry-first"},
    ),
    Case("presets list", "get", lambda w, p: "/api/v1/presets/", everyone(200)),
    # Issue #24: presets belong to a namespace, whose editors manage them; global ones reach every
    # namespace, so only superusers add or change them (none of the personas is one).
    Case(
        "preset create",
        "post",
        lambda w, p: "/api/v1/presets/",
        {"owner": 201, "teammate": 403, "outsider": 404, "admin": 201},
        body=lambda w, p: {
            "name": f"mine-{p}",
            "cluster": w.cluster.name,
            "namespace": NAMESPACE,
            "spec": {"strategies": ["dump"]},
        },
    ),
    Case(
        "global preset create",
        "post",
        lambda w, p: "/api/v1/presets/",
        everyone(403),
        body=lambda w, p: {"name": f"mine-{p}", "spec": {"strategies": ["dump"]}},
    ),
    Case("namespace preset detail", "get", namespace_preset, {**job_scoped(read=True)}),
    Case(
        "namespace preset update",
        "put",
        namespace_preset,
        job_scoped(read=False),
        body=lambda w, p: {"description": "changed", "spec": {"strategies": ["retry"]}},
    ),
    Case("namespace preset delete", "delete", namespace_preset, with_status(job_scoped(read=False), 204)),
    Case("preset detail", "get", lambda w, p: "/api/v1/presets/retry-first/", everyone(200)),
    Case(
        "preset update",
        "put",
        lambda w, p: f"/api/v1/presets/{w.owner_preset.name}/",
        # A global preset (here a legacy one the owner made before presets had namespaces): superusers
        # only, its author included (issue #24: it reaches every namespace's jobs).
        everyone(403),
        body=lambda w, p: {"description": "changed", "spec": {"strategies": ["retry"]}},
    ),
    Case("preset delete", "delete", new_preset, everyone(403)),
    Case(
        "builtin preset update",
        "put",
        lambda w, p: "/api/v1/presets/retry-first/",
        everyone(403),
        body=lambda w, p: {"spec": {"strategies": []}},
    ),
    Case("builtin preset delete", "delete", lambda w, p: "/api/v1/presets/retry-first/", everyone(403)),
    Case(
        "audit",
        "get",
        lambda w, p: "/api/v1/audit/",
        {"owner": 403, "teammate": 403, "outsider": 403, "admin": 200},
    ),
    # Webhooks: administrators of the webhook's whole scope only, reads included (the URL may hold
    # the receiver's key); apps/events/webhook_services.py.
    Case("webhooks list", "get", lambda w, p: "/api/v1/webhooks/", admin_only(200)),
    Case(
        "webhook create",
        "post",
        lambda w, p: "/api/v1/webhooks/",
        admin_only(201),
        body=lambda w, p: {
            "name": f"hook-{p}",
            "cluster": w.cluster.name,
            "namespace": NAMESPACE,
            "url": "https://hooks.example.com/x",
            "secret": "0123456789abcdef",
        },
    ),
    Case("webhook detail", "get", team_webhook, admin_only(200)),
    Case("webhook update", "patch", team_webhook, admin_only(200), body=lambda w, p: {"active": False}),
    Case("webhook delete", "delete", team_webhook, admin_only(204)),
    Case("webhook deliveries", "get", lambda w, p: team_webhook(w, p) + "deliveries/", admin_only(200)),
    Case("webhook test", "post", lambda w, p: team_webhook(w, p) + "test/", admin_only(202)),
    Case("tokens list", "get", lambda w, p: "/api/v1/tokens/", everyone(200)),
    Case(
        "token create",
        "post",
        lambda w, p: "/api/v1/tokens/",
        everyone(201),
        body=lambda w, p: {"name": "new"},
    ),
    Case("token revoke", "delete", own_token, everyone(204)),
    Case("token revoke foreign", "delete", foreign_token, everyone(404)),
]


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_persona_gets_expected_status(world: World, case: Case, persona: str) -> None:
    client = world.client(persona)
    path = case.path(world, persona)
    response = getattr(client, case.method)(path, case.body(world, persona), format="json")
    expected = case.expected[persona]
    assert response.status_code == expected, (
        persona,
        case.name,
        response.status_code,
        response.content[:500],
    )
    if expected >= 400:
        body = response.json()
        assert body["errors"] and {"code", "field", "message"} <= set(body["errors"][0])


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_anonymous_is_told_to_authenticate(world: World, case: Case) -> None:
    response = getattr(world.client(None), case.method)(
        case.path(world, "owner"), case.body(world, "owner"), format="json"
    )
    assert response.status_code == 401
    assert response.json()["errors"][0]["code"] == "not_authenticated"
    assert response["WWW-Authenticate"] == "Token"


def test_the_other_namespace_is_invisible_even_to_the_owner(world: World) -> None:
    response = world.client("owner").get(f"/api/v1/jobs/{world.other_job.pk}/policy/")
    assert response.status_code == 404


def test_superuser_sees_everything(world: World, superuser_client: Any) -> None:
    names = {job["name"] for job in superuser_client.get("/api/v1/jobs/").json()["results"]}
    assert names == {"llama", "secret"}
    assert superuser_client.get("/api/v1/audit/").status_code == 200


def test_job_list_is_filtered_to_visible_jobs(world: World) -> None:
    assert [j["name"] for j in world.client("owner").get("/api/v1/jobs/").json()["results"]] == ["llama"]
    assert world.client("outsider").get("/api/v1/jobs/").json()["results"] == []


def test_admin_audit_is_filtered_to_administered_namespaces(world: World, superuser_client: Any) -> None:
    world.client("owner").put(
        f"/api/v1/jobs/{world.job.pk}/policy/", {"spec": {"strategies": ["dump"]}}, format="json"
    )
    entries = world.client("admin").get("/api/v1/audit/").json()["results"]
    assert entries and all(
        e["object_type"] == "jobs.trainingjob" and e["object_id"] == str(world.job.pk) for e in entries
    )
    everything = superuser_client.get("/api/v1/audit/").json()["results"]
    assert any(e["action"] == "token.issue" for e in everything)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("delete", "/api/v1/jobs/{job}/"),
        ("patch", "/api/v1/jobs/{job}/policy/"),
        ("get", "/api/v1/render/"),
        ("put", "/api/v1/jobs/"),
        ("get", "/api/v1/policies/validate/"),
        ("patch", "/api/v1/presets/retry-first/"),
    ],
)
def test_unsupported_methods_answer_405_in_the_error_format(world: World, method: str, path: str) -> None:
    response = getattr(world.client("owner"), method)(path.format(job=world.job.pk), {}, format="json")
    assert response.status_code == 405
    assert response.json()["errors"][0]["code"] == "method_not_allowed"

"""Permission matrix of the issue-15 endpoints, with the personas of ``tests/support/world.py``.

owner = editor on team-a, teammate = viewer, outsider = nothing, admin = admin on team-a. Namespace
defaults: viewers read, only namespace admins change. Recreate: editors; the world's cluster is
unreachable, so an allowed recreate answers 409 recreate_failed and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from apps.admission.services import namespace_default_set
from apps.audit.actors import Actor
from apps.audit.models import AuditEntry
from tests.support.world import NAMESPACE, PERSONAS, World

pytestmark = pytest.mark.django_db
BASE = f"/api/v1/clusters/sim/namespaces/{NAMESPACE}/default-policy/"


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    path: Callable[[World], str]
    expected: dict[str, int]
    body: Any = None


def with_default(w: World) -> str:
    namespace_default_set(
        cluster=w.cluster, namespace=NAMESPACE, spec={"strategies": ["dump"]}, actor=Actor(name="setup")
    )
    return BASE


VIEW = {"owner": 200, "teammate": 200, "outsider": 404, "admin": 200}
ADMIN_ONLY = {"owner": 403, "teammate": 403, "outsider": 404, "admin": 200}
CASES = [
    Case("default get (none yet)", "get", lambda w: BASE, VIEW),
    Case("default get", "get", with_default, VIEW),
    Case("default put spec", "put", lambda w: BASE, ADMIN_ONLY, {"spec": {"strategies": ["retry", "dump"]}}),
    Case("default put preset", "put", lambda w: BASE, ADMIN_ONLY, {"preset": "retry-first", "comment": "x"}),
    Case("default delete", "delete", with_default, ADMIN_ONLY),
    Case("default revisions", "get", lambda w: BASE + "revisions/", VIEW),
    Case("other namespace", "get", lambda w: BASE.replace(NAMESPACE, "team-b"), dict.fromkeys(PERSONAS, 404)),
    Case(
        "recreate",
        "post",
        lambda w: f"/api/v1/jobs/{w.job.pk}/recreate/",
        {"owner": 409, "teammate": 403, "outsider": 404, "admin": 409},
        {"confirm": "llama"},
    ),
]


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_persona_gets_expected_status(world: World, case: Case, persona: str) -> None:
    response = getattr(world.client(persona), case.method)(case.path(world), case.body, format="json")
    assert response.status_code == case.expected[persona], (persona, response.content[:400])
    if response.status_code >= 400:
        assert {"code", "field", "message"} <= set(response.json()["errors"][0])


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_anonymous_is_told_to_authenticate(world: World, case: Case) -> None:
    response = getattr(world.client(None), case.method)(case.path(world), case.body, format="json")
    assert response.status_code == 401


def test_put_validates_names_the_field_and_keeps_history(world: World) -> None:
    admin = world.client("admin")
    bad = admin.put(BASE, {"spec": {"strategies": ["teleport"]}}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"].startswith("/strategies")
    assert admin.put(BASE, {"preset": "nope"}, format="json").json()["errors"][0]["field"] == "preset"
    assert admin.put(BASE, {}, format="json").status_code == 400
    assert admin.get(BASE.replace(NAMESPACE, "Bad_NS")).status_code == 400
    assert admin.put(BASE, {"spec": {"strategies": ["dump"]}}, format="json").json()["revision"] == 1
    assert admin.put(BASE, {"preset": "retry-first"}, format="json").json()["preset"] == "retry-first"
    assert admin.delete(BASE).json()["spec"] is None
    assert admin.delete(BASE).status_code == 404
    history = admin.get(BASE + "revisions/").json()["results"]
    assert [r["number"] for r in history] == [3, 2, 1] and history[0]["spec"] is None
    # The audit API shows namespace admins only job entries (apps/accounts/selectors.py); read the table.
    actions = list(AuditEntry.objects.values_list("action", flat=True))
    assert {"namespace_default.update", "namespace_default.delete"} <= set(actions)


def test_recreate_input_errors_name_the_field(world: World) -> None:
    owner = world.client("owner")
    url = f"/api/v1/jobs/{world.job.pk}/recreate/"
    assert owner.post(url, {"confirm": "nope"}, format="json").json()["errors"][0]["field"] == "confirm"
    assert (
        owner.post(url, {"confirm": "llama", "revision": 99}, format="json").json()["errors"][0]["field"]
        == "revision"
    )
    assert owner.post(url, {}, format="json").json()["errors"][0]["field"] == "confirm"

"""Issue #24 (low): presets were global and resolved live by name at admission, so an editor of
namespace A could change what namespace B's jobs get. Now a preset is global (built-ins, read-only;
superusers' own) or belongs to one namespace of one cluster, managed by that namespace's editors, and
a name is resolved in the job's namespace first, then among the global presets."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import IntegrityError, transaction

from apps.admission.merge import ANNOTATION_PRESET
from apps.admission.review import admit
from apps.audit.actors import Actor
from apps.policies.models import Preset
from apps.policies.preset_services import (
    PresetForbidden,
    preset_create,
    preset_resolve,
    preset_spec_resolve,
    preset_update,
)
from mindcluster import keys as k
from tests.support.world import NAMESPACE, World

pytestmark = pytest.mark.django_db

ONLY_DUMP = {"strategies": ["dump"], "fault_scheduling": "grace"}


def _shadow(world: World) -> Preset:
    """Team-a's own "retry-first", shadowing the built-in of that name in team-a only."""
    return preset_create(
        name="retry-first",
        description="team-a's",
        spec=ONLY_DUMP,
        actor=Actor(user=world.users["owner"]),
        cluster=world.cluster,
        namespace=NAMESPACE,
    )


def test_a_name_resolves_in_the_jobs_namespace_then_globally(world: World) -> None:
    own = _shadow(world)
    assert preset_resolve("retry-first", cluster=world.cluster, namespace=NAMESPACE) == own
    builtin = preset_resolve("retry-first", cluster=world.cluster, namespace="team-b")
    assert builtin is not None and builtin.builtin
    assert preset_resolve("retry-first", cluster=None, namespace="") == builtin  # tools: global only
    assert preset_spec_resolve("nope", cluster=world.cluster, namespace=NAMESPACE) is None


def _review(namespace: str, name: str) -> dict[str, Any]:
    job = {
        "apiVersion": f"{k.ASCENDJOB_GROUP}/v1",
        "kind": "AscendJob",
        "metadata": {"name": name, "namespace": namespace, "annotations": {ANNOTATION_PRESET: "retry-first"}},
        "spec": {"replicaSpecs": {}},
    }
    return {
        "uid": f"u-{name}",
        "kind": {"group": k.ASCENDJOB_GROUP, "version": "v1", "kind": "AscendJob"},
        "namespace": namespace,
        "operation": "CREATE",
        "dryRun": True,
        "object": job,
    }


def test_admission_gives_another_namespaces_job_the_builtin_not_team_as_preset(world: World) -> None:
    _shadow(world)
    mine = json.dumps(admit(_review(NAMESPACE, "in-a"), "sim").patch)
    theirs = json.dumps(admit(_review("team-b", "in-b"), "sim").patch)
    assert "retry" not in mine.replace("retry-first", "")  # team-a's own: dump only
    assert "retry" in theirs.replace("retry-first", "")  # team-b: the built-in, untouched by team-a


def test_only_the_namespaces_editors_change_its_presets(world: World) -> None:
    own = _shadow(world)
    with pytest.raises(PresetForbidden, match="editor role"):
        preset_update(preset=own, description="x", spec=ONLY_DUMP, actor=Actor(user=world.users["teammate"]))
    with pytest.raises(PresetForbidden):  # an editor of team-a cannot add one to team-b
        preset_create(
            name="x",
            description="",
            spec=ONLY_DUMP,
            actor=Actor(user=world.users["owner"]),
            cluster=world.cluster,
            namespace="team-b",
        )
    with pytest.raises(PresetForbidden, match="superuser"):  # nor a global one
        preset_create(name="x", description="", spec=ONLY_DUMP, actor=Actor(user=world.users["owner"]))
    preset_update(preset=own, description="ok", spec=ONLY_DUMP, actor=Actor(user=world.users["admin"]))


def test_a_job_policy_from_a_preset_uses_its_namespaces_own(world: World) -> None:
    own = _shadow(world)
    client = world.client("owner")
    response = client.put(
        f"/api/v1/jobs/{world.job.pk}/policy/", {"preset": "retry-first", "revision": 1}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["spec"]["strategies"] == ["dump"]
    assert world.job.revisions.get(number=2).source_preset == own


def test_the_list_shows_global_and_visible_namespaces_presets_only(world: World) -> None:
    _shadow(world)
    Preset.objects.create(name="hidden", cluster=world.cluster, namespace="team-b", spec=ONLY_DUMP)
    names = {
        (p["name"], p["namespace"])
        for p in world.client("outsider").get("/api/v1/presets/?limit=500").json()["results"]
    }
    assert (
        ("retry-first", "") in names
        and ("retry-first", NAMESPACE) not in names
        and ("hidden", "team-b") not in names
    )
    mine = (
        world.client("owner")
        .get(f"/api/v1/presets/?limit=500&cluster=sim&namespace={NAMESPACE}")
        .json()["results"]
    )
    assert ("retry-first", NAMESPACE) in {(p["name"], p["namespace"]) for p in mine}
    assert world.client("owner").get("/api/v1/presets/?cluster=sim&namespace=team-b").status_code == 404


def test_the_database_keeps_scopes_whole(world: World) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        Preset.objects.create(name="half", namespace="team-a", spec={})  # a namespace without its cluster
    with pytest.raises(IntegrityError), transaction.atomic():
        Preset.objects.create(name="retry-first", spec={})  # two global presets of one name

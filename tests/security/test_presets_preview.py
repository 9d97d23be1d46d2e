"""Issue #16 item 8, revised by #24: a global preset changes only by a superuser (a namespace's
presets by its editors: tests/policies/test_namespace_presets.py); preview shows a viewer only
what a viewer may read of the live AscendJob (no env values, no managedFields, no last-applied copy).

The live object comes from the API emulator over real HTTP (the official client), as in production.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from apps.accounts.services import token_issue
from apps.policies.models import Preset
from simcluster.kubeapi import KubeApiEmulator
from tests.support.cluster import emulator_with_kubeconfig
from tests.support.sim import make_job
from tests.support.world import World

pytestmark = pytest.mark.django_db

SECRET = "hunter2-do-not-show"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def test_a_namespace_admin_may_not_change_or_delete_someone_elses_preset(world: World) -> None:
    client = world.client("admin")  # admin of team-a, not a superuser
    path = f"/api/v1/presets/{world.owner_preset.name}/"
    changed = client.put(path, {"description": "mine now", "spec": {"strategies": []}}, format="json")
    assert changed.status_code == 403, changed.content
    assert "only a superuser" in changed.json()["errors"][0]["message"]
    assert client.delete(path).status_code == 403
    assert Preset.objects.filter(name=world.owner_preset.name, description="").exists()


def test_a_superuser_may_its_author_no_longer(world: World, superuser_client: Any) -> None:
    """A global preset reaches every namespace's jobs: its author (an editor of one namespace) may
    not change it any more (issue #24); a superuser may."""
    path = f"/api/v1/presets/{world.owner_preset.name}/"
    body = {"description": "tuned", "spec": {"strategies": ["retry"]}}
    assert world.client("owner").put(path, body, format="json").status_code == 403
    assert superuser_client.put(path, {**body, "description": "by root"}, format="json").status_code == 200
    assert superuser_client.delete(path).status_code == 204


def test_the_rule_holds_below_the_api_too(world: World) -> None:
    """The service refuses as well, so no other entry point (page, command) can skip the check."""
    from apps.audit.actors import Actor
    from apps.policies.preset_services import PresetForbidden, preset_delete

    with pytest.raises(PresetForbidden):
        preset_delete(preset=world.owner_preset, actor=Actor(user=world.users["admin"], name="admin"))


# --- preview redaction ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeApiEmulator]:
    with emulator_with_kubeconfig(tmp_path_factory.mktemp("kube")) as emu:
        yield emu


def _live_job(name: str, namespace: str) -> dict[str, Any]:
    """A job as kubectl left it: secrets in env (a value and a secretKeyRef), managedFields, and the
    last-applied copy that repeats the env."""
    secrets = [
        {"name": "WANDB_API_KEY", "value": SECRET},
        {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
    ]
    job = make_job(name, namespace=namespace, strategies=None, env=secrets, pod_ip=False, taskd=False)
    job["metadata"]["annotations"][LAST_APPLIED] = json.dumps({"env": SECRET})
    job["metadata"]["managedFields"] = [
        {"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}
    ]
    return job


@pytest.fixture
def live_world(world: World, emulator: KubeApiEmulator) -> World:
    api = k8s_config.new_client_from_config(config_file=str(emulator.kubeconfig))  # type: ignore[attr-defined]
    try:
        namespace = f"ns-{uuid.uuid4().hex[:6]}"
        k8s.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
        k8s.CustomObjectsApi(api).create_namespaced_custom_object(
            "mindxdl.gitee.com", "v1", namespace, "ascendjobs", _live_job(world.job.name, namespace)
        )
    finally:
        api.close()
    world.cluster.kubeconfig_path = str(emulator.kubeconfig)  # type: ignore[attr-defined]
    world.cluster.save(update_fields=["kubeconfig_path"])
    world.job.namespace = namespace
    world.job.save(update_fields=["namespace"])
    from apps.accounts.models import NamespaceGrant, Role

    NamespaceGrant.objects.create(role=Role.EDITOR, user=world.users["owner"], namespace=namespace)
    viewer = User.objects.create_user("ns-viewer", password="pw")
    NamespaceGrant.objects.create(role=Role.VIEWER, user=viewer, namespace=namespace)
    world.keys["viewer"] = token_issue(viewer, "v")[1]
    return world


def _preview(world: World, persona: str) -> dict[str, Any]:
    response = world.client(persona).post(
        f"/api/v1/jobs/{world.job.pk}/policy/preview/",
        {"spec": {"strategies": ["retry", "recover", "dump"], "ttp_port": 8001}},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["live"]["available"] is True, body["live"]
    return body


def test_a_viewer_sees_no_env_values_managed_fields_or_last_applied_copy(live_world: World) -> None:
    body = _preview(live_world, "viewer")
    text = json.dumps(body)
    assert SECRET not in text
    assert "managedFields" not in text and LAST_APPLIED not in text
    assert "secretKeyRef" not in text
    # What the policy itself renders stays readable: the viewer can see what would change.
    master = body["render"]["manifest"]["spec"]["replicaSpecs"]["Master"]
    containers = master["template"]["spec"]["containers"]
    env = {entry["name"]: entry for entry in containers[0]["env"]}
    assert env["TTP_PORT"]["value"] == "8001"
    assert env["WANDB_API_KEY"] == {"name": "WANDB_API_KEY", "value": "(hidden)"}
    assert env["DB_PASSWORD"] == {"name": "DB_PASSWORD", "valueFrom": "(hidden)"}
    assert body["redacted"] is True


def test_an_editor_still_sees_the_live_object_in_full(live_world: World) -> None:
    body = _preview(live_world, "owner")
    assert SECRET in json.dumps(body["render"]["manifest"])
    assert body["redacted"] is False

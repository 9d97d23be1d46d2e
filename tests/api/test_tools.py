"""``/policies/validate/`` (a CI gate: results are data) and ``/render/`` (same format out as in)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from apps.api.policies.examples import EXAMPLE_MANIFEST
from apps.policies.validation import validate_manifest, validate_policy
from mindcluster import keys as k
from tests.support.world import World

pytestmark = pytest.mark.django_db

VALIDATE = "/api/v1/policies/validate/"
RENDER = "/api/v1/render/"


def load_documents(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8", errors="replace")) if d]


def test_validate_returns_200_with_the_validators_answer(world: World) -> None:
    spec = {"strategies": ["retry", "retry", "exit"], "fault_scheduling": "soft"}
    response = world.client("outsider").post(VALIDATE, {"spec": spec}, format="json")
    assert response.status_code == 200
    assert response.json() == validate_policy(spec).to_dict()
    assert response.json()["valid"] is False


@pytest.mark.parametrize("spec", [None, 5, "retry", [], {"strategies": None}])
def test_validate_treats_any_json_spec_as_data(world: World, spec: Any) -> None:
    response = world.client("owner").post(VALIDATE, {"spec": spec}, format="json")
    assert response.status_code == 200 and response.json()["valid"] is False


def test_validate_a_spec_against_a_yaml_manifest(world: World) -> None:
    manifest = yaml.safe_dump(
        {
            **EXAMPLE_MANIFEST,
            "metadata": {**EXAMPLE_MANIFEST["metadata"], "labels": {k.LABEL_FRAMEWORK: "mindspore"}},
        }
    )
    body = (
        world.client("owner")
        .post(VALIDATE, {"spec": {"strategies": ["elastic-training"]}, "manifest": manifest}, format="json")
        .json()
    )
    assert body["valid"] is False
    assert "elastic_training_requires_pytorch" in {e["code"] for e in body["errors"]}


def test_validate_against_a_registered_job_uses_its_release(world: World) -> None:
    world.job.mindcluster_version = "7.1"
    world.job.save()
    body = (
        world.client("owner")
        .post(
            VALIDATE,
            {"spec": {"strategies": ["elastic-training"], "mindcluster_version": "7.1"}, "job": world.job.pk},
            format="json",
        )
        .json()
    )
    assert "strategy_not_in_release" in {e["code"] for e in body["errors"]}


def test_validate_with_a_job_the_user_may_not_see_names_the_field(world: World) -> None:
    response = world.client("outsider").post(VALIDATE, {"spec": {}, "job": world.job.pk}, format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "job"


def test_render_json_in_json_out(world: World) -> None:
    response = world.client("owner").post(
        RENDER, {"manifest": EXAMPLE_MANIFEST, "policy": {"strategies": ["recover", "retry"]}}, format="json"
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["format"] == "json"
    assert body["manifest"]["metadata"]["annotations"][k.ANNOTATION_RECOVER_STRATEGY] == "retry,recover"
    assert body["configmap"]["metadata"]["name"] == f"{k.TASKD_MANAGER_CONFIGMAP_PREFIX}llama-7b"
    assert "manager.py" in body["artifacts"]


def test_render_yaml_in_yaml_out_and_format_override(world: World) -> None:
    text = yaml.safe_dump(EXAMPLE_MANIFEST)
    body = (
        world.client("owner").post(RENDER, {"manifest": text, "preset": "retry-first"}, format="json").json()
    )
    assert body["format"] == "yaml" and isinstance(body["manifest"], str)
    merged = yaml.safe_load(body["manifest"])
    assert merged["metadata"]["annotations"][k.ANNOTATION_RECOVER_STRATEGY] == "retry,recover,dump"
    assert yaml.safe_load(body["configmap"])["kind"] == "ConfigMap"
    as_json = (
        world.client("owner")
        .post(RENDER, {"manifest": text, "preset": "retry-first", "format": "json"}, format="json")
        .json()
    )
    assert as_json["manifest"] == merged


@pytest.mark.parametrize(
    ("break_it", "code"),
    [
        (lambda m: m["metadata"]["labels"].clear(), "manifest_missing_framework"),
        (lambda m: m["spec"]["replicaSpecs"]["Master"].update(replicas=2), "manifest_leader_replicas"),
        (
            lambda m: m["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(
                name="main"
            ),
            "manifest_missing_ascend_container",
        ),
    ],
)
def test_render_rejects_an_invalid_ascendjob_naming_the_problem(
    world: World, break_it: Any, code: str
) -> None:
    manifest = json.loads(json.dumps(EXAMPLE_MANIFEST))
    break_it(manifest)
    response = world.client("owner").post(RENDER, {"manifest": manifest, "policy": {}}, format="json")
    assert response.status_code == 400
    error = next(e for e in response.json()["errors"] if e["code"] == code)
    assert error["field"].startswith("manifest:/") and error["message"]


def test_render_rejects_an_invalid_policy_with_the_validators_codes(world: World) -> None:
    response = world.client("owner").post(
        RENDER, {"manifest": EXAMPLE_MANIFEST, "policy": {"strategies": ["teleport"]}}, format="json"
    )
    assert response.status_code == 400 and response.json()["errors"][0]["code"] == "unknown_strategy"


@pytest.mark.parametrize(
    ("manifest", "code"),
    [
        ("a: [1, 2", "invalid_yaml"),
        ("", "invalid_yaml"),
        ("a: !!binary aGVsbG8=", "invalid_yaml"),
        ("x: .nan", "invalid_yaml"),
        ("kind: ConfigMap\n---\nkind: Secret\n", "no_ascendjob"),
        (12, "invalid_type"),
    ],
)
def test_render_names_unreadable_manifests(world: World, manifest: Any, code: str) -> None:
    response = world.client("owner").post(
        RENDER, {"manifest": manifest, "preset": "retry-first"}, format="json"
    )
    assert response.status_code == 400
    assert (
        response.json()["errors"][0]["code"] == code and response.json()["errors"][0]["field"] == "manifest"
    )


def test_render_survives_a_yaml_alias_bomb(world: World) -> None:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join(f'*a{i - 1}' for _ in range(10))}]" for i in range(1, 9)]
    response = world.client("owner").post(RENDER, {"manifest": "\n".join(lines), "policy": {}}, format="json")
    assert response.status_code == 400 and "more than" in response.json()["errors"][0]["message"]


def test_render_the_shared_samples(world: World, shared_dir: Path) -> None:
    samples = sorted((shared_dir / "reference" / "samples").glob("*.yaml"))
    assert samples
    for sample in samples:
        text = sample.read_text(encoding="utf-8", errors="replace")
        documents = load_documents(sample)
        job = next(d for d in documents if d.get("kind") == k.ASCENDJOB_KIND)
        expected_errors = {i.code for i in validate_manifest(job) if i.severity == "error"}
        response = world.client("owner").post(RENDER, {"manifest": text, "preset": "in-place"}, format="json")
        if expected_errors:
            assert response.status_code == 400, sample.name
            assert expected_errors <= {e["code"] for e in response.json()["errors"]}, sample.name
            continue
        assert response.status_code == 200, (sample.name, response.json())
        rendered = [d for d in yaml.safe_load_all(response.json()["manifest"]) if d]
        assert [d["kind"] for d in rendered] == [d["kind"] for d in documents], sample.name  # others kept
        merged = next(d for d in rendered if d["kind"] == k.ASCENDJOB_KIND)
        assert merged["metadata"]["annotations"][k.ANNOTATION_RECOVER_STRATEGY] == "recover-in-place,recover"

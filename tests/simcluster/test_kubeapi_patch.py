"""PATCH content types, preconditions and no-op behaviour."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from simcluster.kubeapi.patch import PatchError, json_patch, merge_patch
from tests.support.kubeapi import ACJ, ascendjob


def _patch(api_client: client.ApiClient, path: str, body: object, content_type: str, query: str = ""):
    url = f"{api_client.configuration.host}{path}{query}"
    resp = api_client.call_api(
        "PATCH", url, header_params={"Content-Type": content_type, "Accept": "application/json"}, body=body
    )
    resp.read()
    return resp.status, json.loads(resp.data)


def test_merge_patch_rfc7386() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}
    assert merge_patch(target, {"a": "z", "c": {"f": None}, "l": [3]}) == {
        "a": "z",
        "c": {"d": "e"},
        "l": [3],
    }
    assert target["c"] == {"d": "e", "f": "g"}  # inputs untouched


def test_json_patch_rfc6902() -> None:
    doc = {"foo": ["bar", "baz"], "x": {"y": 1}}
    out = json_patch(
        doc,
        [
            {"op": "add", "path": "/foo/1", "value": "qux"},
            {"op": "add", "path": "/foo/-", "value": "end"},
            {"op": "replace", "path": "/x/y", "value": 2},
            {"op": "copy", "from": "/x", "path": "/x2"},
            {"op": "move", "from": "/x2/y", "path": "/moved"},
            {"op": "remove", "path": "/foo/0"},
            {"op": "test", "path": "/moved", "value": 2},
            {"op": "add", "path": "/a~1b", "value": True},
        ],
    )
    assert out == {"foo": ["qux", "baz", "end"], "x": {"y": 2}, "x2": {}, "moved": 2, "a/b": True}
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "test", "path": "/x/y", "value": True}])
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "replace", "path": "/nope", "value": 1}])


def test_patch_content_types(api_client: client.ApiClient, custom: client.CustomObjectsApi, ns: str) -> None:
    custom.create_namespaced_custom_object(
        *ACJ, ns, "ascendjobs", ascendjob("j", replicas=1, tags=["a", "b"])
    )
    path = f"/apis/mindxdl.gitee.com/v1/namespaces/{ns}/ascendjobs/j"
    code, out = _patch(api_client, path, {"spec": {"tags": ["c"]}}, "application/strategic-merge-patch+json")
    assert code == 200 and out["spec"]["tags"] == ["c"]  # lists replaced
    code, out = _patch(
        api_client,
        path,
        [{"op": "replace", "path": "/spec/replicas", "value": 5}],
        "application/json-patch+json",
    )
    assert code == 200 and out["spec"]["replicas"] == 5
    apply_body = {
        "apiVersion": "mindxdl.gitee.com/v1",
        "kind": "AscendJob",
        "metadata": {"name": "j"},
        "spec": {"replicas": 6},
    }
    code, out = _patch(api_client, path, apply_body, "application/apply-patch+yaml")
    assert code == 400 and out["reason"] == "BadRequest"  # fieldManager is required
    # spec.replicas is owned by the earlier json-patch's manager: a conflict unless forced (issue 17).
    code, out = _patch(api_client, path, apply_body, "application/apply-patch+yaml", "?fieldManager=test")
    assert code == 409 and out["reason"] == "Conflict" and ".spec.replicas" in out["message"]
    code, out = _patch(
        api_client, path, apply_body, "application/apply-patch+yaml", "?fieldManager=test&force=true"
    )
    assert code == 200 and out["spec"]["replicas"] == 6 and out["spec"]["tags"] == ["c"]
    code, out = _patch(api_client, path, "spec: {}", "text/plain")
    assert code == 415 and out["reason"] == "UnsupportedMediaType"


def test_server_side_apply_creates(api_client: client.ApiClient, ns: str) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"k": "v"}}
    code, out = _patch(
        api_client,
        f"/api/v1/namespaces/{ns}/configmaps/applied",
        body,
        "application/apply-patch+yaml",
        "?fieldManager=me",
    )
    assert code == 201 and out["data"] == {"k": "v"}


def test_json_patch_test_failure_is_422(custom: client.CustomObjectsApi, ns: str) -> None:
    custom.create_namespaced_custom_object(*ACJ, ns, "ascendjobs", ascendjob("j", replicas=1))
    for ops in (
        [{"op": "test", "path": "/spec/replicas", "value": 2}],
        [{"op": "remove", "path": "/spec/missing"}],
    ):
        with pytest.raises(client.ApiException) as exc:
            custom.patch_namespaced_custom_object(
                *ACJ, ns, "ascendjobs", "j", ops, _content_type="application/json-patch+json"
            )
        assert exc.value.status == 422 and json.loads(exc.value.body)["reason"] == "Invalid"
    assert custom.get_namespaced_custom_object(*ACJ, ns, "ascendjobs", "j")["spec"]["replicas"] == 1


def test_patch_resource_version_precondition(custom: client.CustomObjectsApi, ns: str) -> None:
    job = custom.create_namespaced_custom_object(*ACJ, ns, "ascendjobs", ascendjob("j", replicas=1))
    rv = job["metadata"]["resourceVersion"]
    ok = custom.patch_namespaced_custom_object(
        *ACJ, ns, "ascendjobs", "j", {"metadata": {"resourceVersion": rv}, "spec": {"replicas": 2}}
    )
    assert ok["spec"]["replicas"] == 2
    with pytest.raises(client.ApiException) as exc:
        custom.patch_namespaced_custom_object(
            *ACJ, ns, "ascendjobs", "j", {"metadata": {"resourceVersion": rv}, "spec": {"replicas": 3}}
        )
    assert exc.value.status == 409 and json.loads(exc.value.body)["reason"] == "Conflict"
    with pytest.raises(client.ApiException) as exc:
        custom.patch_namespaced_custom_object(
            *ACJ,
            ns,
            "ascendjobs",
            "j",
            [{"op": "replace", "path": "/metadata/resourceVersion", "value": rv}],
            _content_type="application/json-patch+json",
        )
    assert exc.value.status == 409


def test_noop_patch_keeps_resource_version(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    job = custom.create_namespaced_custom_object(*ACJ, ns, "ascendjobs", ascendjob("j", replicas=1))
    same = custom.patch_namespaced_custom_object(*ACJ, ns, "ascendjobs", "j", {"spec": {"replicas": 1}})
    assert same["metadata"]["resourceVersion"] == job["metadata"]["resourceVersion"]
    # Nothing changed, so a watcher from the job's rv sees nothing.
    from kubernetes import watch

    events = list(
        watch.Watch().stream(
            custom.list_namespaced_custom_object,
            *ACJ,
            ns,
            "ascendjobs",
            resource_version=job["metadata"]["resourceVersion"],
            timeout_seconds=1,
        )
    )
    assert events == []


def test_patch_missing_object_is_404(core: client.CoreV1Api, ns: str) -> None:
    with pytest.raises(client.ApiException) as exc:
        core.patch_namespaced_config_map("ghost", ns, {"data": {"a": "b"}})
    assert exc.value.status == 404

"""Create / get / replace / delete semantics through the official client."""

from __future__ import annotations

import json
import re

import pytest
from kubernetes import client

from tests.support.kubeapi import ACJ, ascendjob, pod


def _status(exc: client.ApiException) -> dict:
    body = json.loads(exc.body)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    assert body["code"] == exc.status
    return body


def test_discovery(api_client: client.ApiClient) -> None:
    version = client.VersionApi(api_client).get_code()
    assert version.major == "1" and version.git_version.startswith("v1.")
    core_resources = client.CoreV1Api(api_client).get_api_resources()
    names = {r.name for r in core_resources.resources}
    assert {"namespaces", "pods", "pods/status", "configmaps", "events"} <= names
    groups = client.ApisApi(api_client).get_api_versions()
    assert {g.name for g in groups.groups} >= {"mindxdl.gitee.com", "scheduling.volcano.sh"}
    acj = client.CustomObjectsApi(api_client).get_api_resources(*ACJ)
    job = next(r for r in acj.resources if r.name == "ascendjobs")
    assert job.kind == "AscendJob" and job.short_names == ["acjob"] and job.namespaced
    assert "ascendjobs/status" in {r.name for r in acj.resources}
    for path in ("/healthz", "/readyz"):
        resp = api_client.call_api("GET", api_client.configuration.host + path)
        resp.read()
        assert resp.status == 200 and resp.data == b"ok"


def test_default_namespaces_exist(core: client.CoreV1Api) -> None:
    names = {n.metadata.name for n in core.list_namespace().items}
    assert {"default", "mindx-dl"} <= names


def test_create_sets_server_fields(custom: client.CustomObjectsApi, ns: str) -> None:
    job = custom.create_namespaced_custom_object(*ACJ, ns, "ascendjobs", ascendjob("job-a"))
    meta = job["metadata"]
    assert re.fullmatch(r"[0-9a-f-]{36}", meta["uid"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"])
    assert meta["namespace"] == ns and meta["generation"] == 1 and int(meta["resourceVersion"]) > 0
    got = custom.get_namespaced_custom_object(*ACJ, ns, "ascendjobs", "job-a")
    assert got == job


def test_resource_versions_are_global_and_increasing(core: client.CoreV1Api, ns: str) -> None:
    rvs = []
    for i in range(3):
        rvs.append(
            int(
                core.create_namespaced_config_map(
                    ns, {"metadata": {"name": f"c{i}"}}
                ).metadata.resource_version
            )
        )
        rvs.append(int(core.create_namespaced_pod(ns, pod(f"p{i}")).metadata.resource_version))
    assert rvs == sorted(rvs) and len(set(rvs)) == len(rvs)


def test_generate_name(core: client.CoreV1Api, ns: str) -> None:
    created = core.create_namespaced_pod(
        ns, {"metadata": {"generateName": "worker-"}, "spec": {"containers": []}}
    )
    assert re.fullmatch(r"worker-[a-z0-9]{5}", created.metadata.name)


def test_duplicate_is_already_exists(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "dup"}})
    with pytest.raises(client.ApiException) as exc:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "dup"}})
    body = _status(exc.value)
    assert exc.value.status == 409 and body["reason"] == "AlreadyExists"
    assert body["message"] == 'configmaps "dup" already exists'


def test_missing_namespace_is_not_found(core: client.CoreV1Api, custom: client.CustomObjectsApi) -> None:
    with pytest.raises(client.ApiException) as exc:
        custom.create_namespaced_custom_object(*ACJ, "nowhere", "ascendjobs", ascendjob("j"))
    body = _status(exc.value)
    assert exc.value.status == 404 and body["message"] == 'namespaces "nowhere" not found'


@pytest.mark.parametrize("bad", ["UPPER", "under_score", "a" * 254, "-lead", "trail-"])
def test_invalid_name_is_422(core: client.CoreV1Api, ns: str, bad: str) -> None:
    with pytest.raises(client.ApiException) as exc:
        core.create_namespaced_config_map(ns, {"metadata": {"name": bad}})
    body = _status(exc.value)
    assert exc.value.status == 422 and body["reason"] == "Invalid"
    cause = body["details"]["causes"][0]
    assert cause["field"] == "metadata.name" and cause["reason"] == "FieldValueInvalid"


def test_empty_or_missing_name_is_422(custom: client.CustomObjectsApi, ns: str) -> None:
    for meta in ({"name": ""}, {}):
        body = ascendjob("x")
        body["metadata"] = meta
        with pytest.raises(client.ApiException) as exc:
            custom.create_namespaced_custom_object(*ACJ, ns, "ascendjobs", body)
        status = _status(exc.value)
        assert exc.value.status == 422
        assert status["details"]["causes"][0]["field"] == "metadata.name"


def test_kind_and_api_version_must_match_endpoint(custom: client.CustomObjectsApi, ns: str) -> None:
    for field, value in (("kind", "PodGroup"), ("apiVersion", "mindxdl.gitee.com/v2")):
        body = ascendjob("x")
        body[field] = value
        with pytest.raises(client.ApiException) as exc:
            custom.create_namespaced_custom_object(*ACJ, ns, "ascendjobs", body)
        assert exc.value.status == 400 and _status(exc.value)["reason"] == "BadRequest"
    body = ascendjob("x")
    del body["kind"]
    with pytest.raises(client.ApiException) as exc:
        custom.create_namespaced_custom_object(*ACJ, ns, "ascendjobs", body)
    assert exc.value.status == 400


def test_get_missing_has_not_found_details(custom: client.CustomObjectsApi, ns: str) -> None:
    with pytest.raises(client.ApiException) as exc:
        custom.get_namespaced_custom_object(*ACJ, ns, "ascendjobs", "ghost")
    body = _status(exc.value)
    assert body["reason"] == "NotFound"
    assert body["details"] == {"name": "ghost", "group": "mindxdl.gitee.com", "kind": "ascendjobs"}
    assert body["message"] == 'ascendjobs.mindxdl.gitee.com "ghost" not found'


def test_replace_with_stale_resource_version_conflicts(custom: client.CustomObjectsApi, ns: str) -> None:
    job = custom.create_namespaced_custom_object(*ACJ, ns, "ascendjobs", ascendjob("j", replicas=1))
    stale = json.loads(json.dumps(job))
    job["spec"]["replicas"] = 2
    updated = custom.replace_namespaced_custom_object(*ACJ, ns, "ascendjobs", "j", job)
    assert int(updated["metadata"]["resourceVersion"]) > int(stale["metadata"]["resourceVersion"])
    stale["spec"]["replicas"] = 3
    with pytest.raises(client.ApiException) as exc:
        custom.replace_namespaced_custom_object(*ACJ, ns, "ascendjobs", "j", stale)
    body = _status(exc.value)
    assert exc.value.status == 409 and body["reason"] == "Conflict"
    assert "the object has been modified; please apply your changes to the latest version" in body["message"]
    # Unconditional PUT (no resourceVersion) is allowed.
    del stale["metadata"]["resourceVersion"]
    assert (
        custom.replace_namespaced_custom_object(*ACJ, ns, "ascendjobs", "j", stale)["spec"]["replicas"] == 3
    )


def test_replace_name_mismatch_is_400(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
    with pytest.raises(client.ApiException) as exc:
        core.replace_namespaced_config_map("a", ns, {"metadata": {"name": "b"}})
    assert exc.value.status == 400


def test_status_isolation_both_ways(custom: client.CustomObjectsApi, ns: str) -> None:
    created = custom.create_namespaced_custom_object(
        *ACJ, ns, "ascendjobs", {**ascendjob("j", replicas=1), "status": {"phase": "ignored"}}
    )
    assert "status" not in created  # status is server-owned on create
    # Main resource ignores .status ...
    out = custom.patch_namespaced_custom_object(
        *ACJ, ns, "ascendjobs", "j", {"spec": {"replicas": 2}, "status": {"phase": "X"}}
    )
    assert "status" not in out and out["spec"]["replicas"] == 2
    # ... and /status ignores spec and metadata.
    out = custom.patch_namespaced_custom_object_status(
        *ACJ,
        ns,
        "ascendjobs",
        "j",
        {"spec": {"replicas": 9}, "metadata": {"labels": {"x": "y"}}, "status": {"phase": "Running"}},
    )
    assert out["status"] == {"phase": "Running"} and out["spec"]["replicas"] == 2
    assert out["metadata"].get("labels", {}) == {}
    full = custom.get_namespaced_custom_object(*ACJ, ns, "ascendjobs", "j")
    full["status"] = {"phase": "Failed"}
    full["spec"]["replicas"] = 4
    after = custom.replace_namespaced_custom_object(*ACJ, ns, "ascendjobs", "j", full)
    assert after["status"] == {"phase": "Running"} and after["spec"]["replicas"] == 4


def test_pod_status_subresource(core: client.CoreV1Api, ns: str) -> None:
    created = core.create_namespaced_pod(ns, pod("p"))
    assert created.status.phase == "Pending"
    core.patch_namespaced_pod_status("p", ns, {"status": {"phase": "Running", "podIP": "10.0.0.5"}})
    got = core.read_namespaced_pod_status("p", ns)
    assert got.status.phase == "Running" and got.status.pod_ip == "10.0.0.5"
    core.patch_namespaced_pod("p", ns, {"status": {"phase": "Failed"}})
    assert core.read_namespaced_pod("p", ns).status.phase == "Running"


def test_generation_bumps_only_on_spec_change(custom: client.CustomObjectsApi, ns: str) -> None:
    custom.create_namespaced_custom_object(*ACJ, ns, "ascendjobs", ascendjob("j", replicas=1))
    out = custom.patch_namespaced_custom_object(
        *ACJ, ns, "ascendjobs", "j", {"metadata": {"labels": {"a": "b"}}}
    )
    assert out["metadata"]["generation"] == 1
    out = custom.patch_namespaced_custom_object_status(
        *ACJ, ns, "ascendjobs", "j", {"status": {"phase": "Running"}}
    )
    assert out["metadata"]["generation"] == 1
    out = custom.patch_namespaced_custom_object(*ACJ, ns, "ascendjobs", "j", {"spec": {"replicas": 2}})
    assert out["metadata"]["generation"] == 2
    out = custom.patch_namespaced_custom_object(
        *ACJ, ns, "ascendjobs", "j", {"metadata": {"generation": 10}, "spec": {"replicas": 2}}
    )
    assert out["metadata"]["generation"] == 2  # generation is server-owned


def test_configmap_whole_body_writable(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    cm = core.patch_namespaced_config_map("cm", ns, {"data": {"b": "2"}})
    assert cm.data == {"a": "1", "b": "2"}
    assert cm.metadata.generation is None


def test_delete_semantics(core: client.CoreV1Api, custom: client.CustomObjectsApi, ns: str) -> None:
    created = core.create_namespaced_pod(ns, pod("p"))
    with pytest.raises(client.ApiException) as exc:
        core.delete_namespaced_pod(
            "p", ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version="1"))
        )
    assert exc.value.status == 409
    with pytest.raises(client.ApiException) as exc:
        core.delete_namespaced_pod(
            "p", ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="not-the-uid"))
        )
    assert exc.value.status == 409
    deleted = core.delete_namespaced_pod(
        "p",
        ns,
        body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(
                resource_version=created.metadata.resource_version, uid=created.metadata.uid
            )
        ),
    )
    assert deleted.metadata.name == "p"  # pods answer with the deleted object
    with pytest.raises(client.ApiException) as exc:
        core.delete_namespaced_pod("p", ns)
    assert exc.value.status == 404
    custom.create_namespaced_custom_object(*ACJ, ns, "ascendjobs", ascendjob("j"))
    status = custom.delete_namespaced_custom_object(*ACJ, ns, "ascendjobs", "j")
    assert status["status"] == "Success" and status["details"]["name"] == "j"


def test_finalizers_delay_deletion(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "f", "finalizers": ["sim/hold"]}})
    core.delete_namespaced_config_map("f", ns)
    held = core.read_namespaced_config_map("f", ns)
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("f", ns, {"metadata": {"finalizers": None}})
    with pytest.raises(client.ApiException) as exc:
        core.read_namespaced_config_map("f", ns)
    assert exc.value.status == 404


def test_namespace_delete_cascades(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "cascade-me"}})
    core.create_namespaced_config_map("cascade-me", {"metadata": {"name": "cm"}})
    core.delete_namespace("cascade-me")
    assert core.list_namespaced_config_map("cascade-me").items == []
    with pytest.raises(client.ApiException) as exc:
        core.read_namespace("cascade-me")
    assert exc.value.status == 404


def test_podgroups_and_events(custom: client.CustomObjectsApi, core: client.CoreV1Api, ns: str) -> None:
    pg = custom.create_namespaced_custom_object(
        "scheduling.volcano.sh",
        "v1beta1",
        ns,
        "podgroups",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "pg"},
            "spec": {"minMember": 2},
        },
    )
    assert pg["metadata"]["generation"] == 1
    ev = core.create_namespaced_event(
        ns,
        {
            "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": "Started",
            "type": "Normal",
            "message": "hi",
        },
    )
    assert ev.reason == "Started"
    listed = core.list_namespaced_event(ns, field_selector="involvedObject.name=p,reason=Started")
    assert [e.metadata.name for e in listed.items] == ["e1"]

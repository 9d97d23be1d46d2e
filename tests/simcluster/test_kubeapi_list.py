"""List semantics: label/field selectors, pagination, resourceVersion handling."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from simcluster.kubeapi import KubeApiEmulator
from tests.support.kubeapi import ACJ, ascendjob, pod

LABELS = {
    "a": {"app": "train", "tier": "x", "rank": "0"},
    "b": {"app": "train", "tier": "y", "rank": "1"},
    "c": {"app": "infer", "tier": "x", "rank": "2"},
    "d": {"app": "infer"},
    "e": {},
}


@pytest.fixture
def labelled(core: client.CoreV1Api, ns: str) -> str:
    for name, labels in LABELS.items():
        core.create_namespaced_pod(ns, pod(name, labels))
    return ns


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=train", "ab"),
        ("app==train", "ab"),
        ("app!=train", "cde"),  # != also matches objects without the key
        ("tier", "abc"),
        ("!tier", "de"),
        ("tier in (x, y)", "abc"),
        ("tier in (y)", "b"),
        ("tier notin (x)", "bde"),
        ("app=infer,tier", "c"),
        ("app in (train,infer),!rank", "d"),
        ("rank>0", "bc"),
        ("rank<1", "a"),
        ("", "abcde"),
    ],
)
def test_label_selectors(core: client.CoreV1Api, labelled: str, selector: str, expected: str) -> None:
    got = core.list_namespaced_pod(labelled, label_selector=selector)
    assert "".join(p.metadata.name for p in got.items) == expected


@pytest.mark.parametrize(
    "bad", ["app=(", "in (a", "tier in x", "a b", "=x", "tier notin ()x", "a,,b", "BAD KEY!"]
)
def test_bad_label_selector_is_400(core: client.CoreV1Api, labelled: str, bad: str) -> None:
    with pytest.raises(client.ApiException) as exc:
        core.list_namespaced_pod(labelled, label_selector=bad)
    assert exc.value.status == 400
    assert json.loads(exc.value.body)["reason"] == "BadRequest"


def test_field_selectors(core: client.CoreV1Api, labelled: str) -> None:
    assert [
        p.metadata.name for p in core.list_namespaced_pod(labelled, field_selector="metadata.name=b").items
    ] == ["b"]
    names = [
        p.metadata.name for p in core.list_namespaced_pod(labelled, field_selector="metadata.name!=b").items
    ]
    assert names == ["a", "c", "d", "e"]
    everywhere = core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={labelled}")
    assert len(everywhere.items) == 5
    pending = core.list_namespaced_pod(labelled, field_selector="status.phase=Pending")
    assert len(pending.items) == 5
    with pytest.raises(client.ApiException) as exc:
        core.list_namespaced_pod(labelled, field_selector="spec.bogus=1")
    body = json.loads(exc.value.body)
    assert exc.value.status == 400 and "field label not supported: spec.bogus" in body["message"]


def test_list_shape(custom: client.CustomObjectsApi, ns: str) -> None:
    custom.create_namespaced_custom_object(*ACJ, ns, "ascendjobs", ascendjob("j1"))
    out = custom.list_namespaced_custom_object(*ACJ, ns, "ascendjobs")
    assert out["kind"] == "AscendJobList" and out["apiVersion"] == "mindxdl.gitee.com/v1"
    assert int(out["metadata"]["resourceVersion"]) >= int(out["items"][0]["metadata"]["resourceVersion"])
    assert "continue" not in out["metadata"]
    allns = custom.list_cluster_custom_object(*ACJ, "ascendjobs")
    assert any(i["metadata"]["namespace"] == ns for i in allns["items"])


def test_pagination_with_continue(core: client.CoreV1Api, ns: str) -> None:
    for i in range(25):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"cm-{i:02d}"}})
    pages, token = [], None
    while True:
        page = core.list_namespaced_config_map(ns, limit=10, _continue=token)
        pages.append([c.metadata.name for c in page.items])
        if len(pages) == 1:
            assert page.metadata.remaining_item_count == 15
            # The snapshot is consistent: writes after the first page are not visible via the token.
            core.create_namespaced_config_map(ns, {"metadata": {"name": "cm-99"}})
        token = page.metadata._continue
        if not token:
            break
    assert [len(p) for p in pages] == [10, 10, 5]
    assert [n for page in pages for n in page] == [f"cm-{i:02d}" for i in range(25)]


def test_invalid_continue_token_is_400(core: client.CoreV1Api, ns: str) -> None:
    for token in ("garbage", "eyJ2IjoxfQ"):
        with pytest.raises(client.ApiException) as exc:
            core.list_namespaced_config_map(ns, limit=1, _continue=token)
        assert exc.value.status == 400


def test_expired_continue_token_is_410(emulator: KubeApiEmulator, core: client.CoreV1Api, ns: str) -> None:
    for i in range(3):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"cm-{i}"}})
    page = core.list_namespaced_config_map(ns, limit=1)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "later"}})
    emulator.compact()
    with pytest.raises(client.ApiException) as exc:
        core.list_namespaced_config_map(ns, limit=1, _continue=page.metadata._continue)
    body = json.loads(exc.value.body)
    assert exc.value.status == 410 and body["reason"] == "Expired"


def test_exact_resource_version_list(emulator: KubeApiEmulator, core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "one"}})
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map(ns, {"metadata": {"name": "two"}})
    old = core.list_namespaced_config_map(ns, resource_version=rv, resource_version_match="Exact")
    assert [c.metadata.name for c in old.items] == ["one"] and old.metadata.resource_version == rv
    emulator.compact()
    with pytest.raises(client.ApiException) as exc:
        core.list_namespaced_config_map(ns, resource_version=rv, resource_version_match="Exact")
    assert exc.value.status == 410
    # NotOlderThan / unspecified match serve the current state.
    assert len(core.list_namespaced_config_map(ns, resource_version=rv).items) == 2

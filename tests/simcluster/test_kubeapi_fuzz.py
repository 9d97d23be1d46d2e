"""Bad and random input never produces a 5xx or a non-Status body."""

from __future__ import annotations

import contextlib
import http.client
import json
from urllib.parse import urlparse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client

from simcluster.kubeapi import KubeApiEmulator
from tests.support.kubeapi import ascendjob

PATCH_TYPES = [
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/json",
    "text/plain",
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
object_like = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": st.sampled_from(["mindxdl.gitee.com/v1", "v1", 3]),
        "kind": st.sampled_from(["AscendJob", "Pod", None]),
        "metadata": st.one_of(
            json_values,
            st.fixed_dictionaries(
                {},
                optional={
                    "name": st.one_of(st.text(max_size=12), st.integers()),
                    "labels": json_values,
                    "resourceVersion": st.one_of(st.text(max_size=3), st.integers()),
                    "finalizers": json_values,
                },
            ),
        ),
        "spec": json_values,
        "status": json_values,
    },
)


class Raw:
    def __init__(self, url: str) -> None:
        parsed = urlparse(url)
        self.host, self.port = parsed.hostname, parsed.port

    def request(self, method: str, path: str, body: bytes = b"", content_type: str = "application/json"):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers={"Content-Type": content_type})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()


def assert_status(code: int, body: bytes, expect: int | None = None) -> dict:
    assert code < 500, body
    if expect is not None:
        assert code == expect, body
    doc = json.loads(body)
    if code >= 400:
        assert doc["kind"] == "Status" and doc["status"] == "Failure" and doc["code"] == code
    return doc


@pytest.fixture(scope="module")
def raw(emulator: KubeApiEmulator, core: client.CoreV1Api) -> Raw:
    with contextlib.suppress(client.ApiException):  # 409 if it already exists
        core.create_namespace({"metadata": {"name": "fuzz"}})
    with contextlib.suppress(client.ApiException):
        client.CustomObjectsApi(core.api_client).create_namespaced_custom_object(
            "mindxdl.gitee.com", "v1", "fuzz", "ascendjobs", ascendjob("target")
        )
    return Raw(emulator.url)


@pytest.fixture(scope="module")
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


JOBS = "/apis/mindxdl.gitee.com/v1/namespaces/fuzz/ascendjobs"


@pytest.mark.parametrize(
    ("method", "path", "body", "ctype", "expect"),
    [
        ("POST", JOBS, b"{not json", "application/json", 400),
        ("POST", JOBS, b"[1,2,3]", "application/json", 400),
        ("POST", JOBS, b'"str"', "application/json", 400),
        ("POST", JOBS, b"", "application/json", 400),
        ("POST", JOBS, b'{"apiVersion":"mindxdl.gitee.com/v1","kind":"AscendJob","metadata":[]}', "", 400),
        (
            "POST",
            JOBS,
            b'{"apiVersion":"mindxdl.gitee.com/v1","kind":"AscendJob","metadata":{"name":5}}',
            "",
            400,
        ),
        (
            "POST",
            JOBS,
            b'{"apiVersion":"mindxdl.gitee.com/v1","kind":"AscendJob","metadata":{"name":"x",'
            b'"labels":{"a":1}}}',
            "",
            400,
        ),
        (
            "POST",
            JOBS,
            b'{"apiVersion":"mindxdl.gitee.com/v1","kind":"AscendJob","metadata":{"name":"x"},"spec":[1]}',
            "",
            400,
        ),
        ("POST", JOBS, b'{"a": NaN}', "application/json", 400),
        ("POST", JOBS, b"[" * 100_000, "application/json", 400),
        ("PATCH", f"{JOBS}/target", b"{bad", "application/merge-patch+json", 400),
        ("PATCH", f"{JOBS}/target", b'{"op":"add"}', "application/json-patch+json", 400),
        ("PATCH", f"{JOBS}/target", b'[{"op":"explode","path":"/x"}]', "application/json-patch+json", 400),
        (
            "PATCH",
            f"{JOBS}/target",
            b'[{"op":"add","path":"/spec/a/b/c","value":1}]',
            "application/json-patch+json",
            422,
        ),
        ("PATCH", f"{JOBS}/target", b"x: [", "application/apply-patch+yaml", 400),
        ("PATCH", f"{JOBS}/target", b'{"kind":"Pod"}', "application/merge-patch+json", 400),
        ("PATCH", f"{JOBS}/target", b"{}", "application/xml", 415),
        ("GET", "/apis/mindxdl.gitee.com/v1/namespaces/fuzz/nothings", b"", "", 404),
        ("GET", "/api/v2/pods", b"", "", 404),
        ("GET", "/apis/unknown.group/v1", b"", "", 404),
        ("GET", "/random/garbage", b"", "", 404),
        ("GET", "/api/v1/namespaces/fuzz/pods/a/b/c", b"", "", 404),
        ("GET", "/api/v1/namespaces/fuzz/configmaps/x/status", b"", "", 404),
        ("PUT", JOBS, b"{}", "application/json", 405),
        ("POST", f"{JOBS}/target", b"{}", "application/json", 405),
        ("POST", "/api/v1/pods", b"{}", "application/json", 405),
        ("GET", f"{JOBS}?labelSelector=a%20in%20(", b"", "", 400),
        ("GET", f"{JOBS}?limit=-1", b"", "", 400),
        ("GET", f"{JOBS}?limit=abc", b"", "", 400),
        ("GET", f"{JOBS}?watch=1&resourceVersion=abc", b"", "", 400),
        ("GET", f"{JOBS}?resourceVersion=1&resourceVersionMatch=Bogus", b"", "", 400),
        ("DELETE", f"{JOBS}/target", b"{oops", "application/json", 400),
    ],
)
def test_bad_requests_are_status_4xx(
    raw: Raw, method: str, path: str, body: bytes, ctype: str, expect: int
) -> None:
    code, data = raw.request(method, path, body, ctype)
    assert_status(code, data, expect)


def test_body_too_large_is_413(raw: Raw) -> None:
    code, data = raw.request("POST", JOBS, b"{" + b" " * (4 * 1024 * 1024) + b"}")
    assert_status(code, data, 413)


def test_malformed_body_via_official_client(api_client: client.ApiClient, raw: Raw) -> None:
    resp = api_client.call_api(
        "POST",
        f"{api_client.configuration.host}{JOBS}",
        header_params={"Content-Type": "application/json"},
        body="{definitely not json",
    )
    resp.read()
    assert_status(resp.status, resp.data, 400)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.binary(max_size=200),
    method=st.sampled_from(["POST", "PATCH", "PUT"]),
    ctype=st.sampled_from(PATCH_TYPES),
)
def test_random_bytes(raw: Raw, data: bytes, method: str, ctype: str) -> None:
    path = JOBS if method == "POST" else f"{JOBS}/target"
    code, body = raw.request(method, path, data, ctype)
    assert_status(code, body)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    doc=st.one_of(object_like, json_values),
    method=st.sampled_from(["POST", "PATCH", "PUT"]),
    ctype=st.sampled_from(PATCH_TYPES[:4]),
)
def test_random_json(raw: Raw, doc: object, method: str, ctype: str) -> None:
    path = JOBS if method == "POST" else f"{JOBS}/target"
    code, body = raw.request(
        method, path, json.dumps(doc).encode(), ctype if method == "PATCH" else "application/json"
    )
    assert_status(code, body)

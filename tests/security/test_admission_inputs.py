"""Issue #24 (low): a malformed AdmissionReview is a 400 that says what is wrong, never a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from apps.jobs.models import Cluster

# The webhook's URLconf: what a process started with ADMISSION_WEBHOOK=true serves.
pytestmark = [pytest.mark.django_db, pytest.mark.urls("controlplane.admission_urls")]

URL = "/admission/ascendjobs/"


def _review(**request: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "uid": "u-1",
        "kind": {"group": "mindxdl.gitee.com", "version": "v1", "kind": "AscendJob"},
        "operation": "CREATE",
        "namespace": "team-a",
        "object": {"apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob", "metadata": {"name": "j"}},
    }
    base.update(request)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": base}


def _post(body: bytes) -> Any:
    return Client().generic("POST", URL, body, content_type="application/json")


@pytest.mark.parametrize(
    ("request_fields", "named"),
    [
        ({"kind": "AscendJob"}, "request.kind"),
        ({"kind": ["AscendJob"]}, "request.kind"),
        ({"operation": {"op": "CREATE"}}, "request.operation"),
        ({"object": "a job"}, "request.object"),
        ({"object": {"metadata": "j"}}, "request.object.metadata"),
        (
            {"object": {"metadata": {"name": "j", "annotations": ["x"]}}},
            "request.object.metadata.annotations",
        ),
        (
            {"object": {"metadata": {"name": "j", "annotations": {"a": 1}}}},
            "request.object.metadata.annotations",
        ),
        ({"object": {"metadata": {"name": "j", "labels": "x"}}}, "request.object.metadata.labels"),
        ({"object": {"metadata": {"name": ["j"]}}}, "request.object.metadata.name"),
        ({"namespace": 7}, "request.namespace"),
        ({"dryRun": "yes"}, "request.dryRun"),
    ],
)
def test_a_review_with_a_field_of_the_wrong_type_is_a_400_naming_it(
    request_fields: dict[str, Any], named: str
) -> None:
    response = _post(json.dumps(_review(**request_fields)).encode())
    assert response.status_code == 400, response.content
    message = response.json()["error"]
    assert message.startswith("not an AdmissionReview: ") and named in message, message


@pytest.mark.parametrize("depth", [200, 100_000])
def test_a_deeply_nested_review_is_a_400(depth: int) -> None:
    job = {"apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob", "metadata": {"name": "j"}, "spec": "@"}
    body = json.dumps(_review(object=job)).encode()
    response = _post(body.replace(b'"@"', b"[" * depth + b"]" * depth))
    assert response.status_code == 400, response.content[:300]
    assert "nested" in response.json()["error"]
    assert _post(body).status_code == 200  # the same review, not nested, is answered


@pytest.mark.parametrize("body", [b"\xff\xfe", b'{"apiVersion": NaN}', b"[]", b'"review"'])
def test_a_body_that_is_not_a_json_object_is_a_400(body: bytes) -> None:
    response = _post(body)
    assert response.status_code == 400, response.content[:300]
    assert response.json()["error"].startswith("not an AdmissionReview: ")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


@given(
    kind=_JSON | st.just({"group": "mindxdl.gitee.com", "kind": "AscendJob"}),
    operation=_JSON | st.just("CREATE"),
    metadata=_JSON | st.fixed_dictionaries({"name": _JSON, "annotations": _JSON, "labels": _JSON}),
    extra=st.dictionaries(st.sampled_from(["namespace", "dryRun", "object", "userInfo"]), _JSON, max_size=2),
)
@hypothesis_settings(max_examples=150, deadline=None)
def test_no_review_of_any_shape_gets_a_server_error(
    kind: Any, operation: Any, metadata: Any, extra: Any
) -> None:
    job = {"apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob", "metadata": metadata}
    body = _review(kind=kind, operation=operation, object=job)
    body["request"].update(extra)
    Cluster.objects.get_or_create(name="shapes")  # so a well-typed review goes all the way through admit
    response = Client(raise_request_exception=False).generic(
        "POST", URL + "?cluster=shapes", json.dumps(body).encode(), content_type="application/json"
    )
    assert response.status_code in (200, 400), response.content[:300]

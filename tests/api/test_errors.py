"""One error format for every failure, and no 5xx for any input: malformed, mistyped, huge or hostile."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.world import World

pytestmark = pytest.mark.django_db

HYPOTHESIS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


def assert_error_format(response: Any, status: int) -> list[dict[str, Any]]:
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"] == "application/json"
    errors = response.json()["errors"]
    assert errors and all({"code", "field", "message"} <= set(e) and e["message"] for e in errors)
    return errors


def raw_post(world: World, path: str, body: bytes | str, content_type: str = "application/json") -> Any:
    return world.client("owner").generic("POST", path, body, content_type=content_type)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ("{not json", "parse_error"),
        ('{"spec": NaN}', "parse_error"),
        ('{"spec": 1e999}', "parse_error"),
        ("[" * 5000 + "]" * 5000, "parse_error"),
        ('{"spec": ' + "9" * 5000 + "}", "parse_error"),
        ("[1, 2]", "invalid_type"),
        ('"text"', "invalid_type"),
    ],
)
def test_malformed_bodies_are_400s(world: World, body: str, code: str) -> None:
    errors = assert_error_format(raw_post(world, "/api/v1/policies/validate/", body), 400)
    assert errors[0]["code"] == code


def test_nul_characters_are_refused_where_they_would_be_stored(world: World) -> None:
    response = world.client("owner").put(
        f"/api/v1/jobs/{world.job.pk}/policy/", {"spec": {"strategies": ["re\x00try"]}}, format="json"
    )
    assert assert_error_format(response, 400)[0]["field"] == "spec"
    validate = world.client("owner").post("/api/v1/policies/validate/", {"spec": {"a\x00": 1}}, format="json")
    assert validate.status_code == 200 and validate.json()["valid"] is False


def test_unknown_fields_are_named(world: World) -> None:
    errors = assert_error_format(
        world.client("owner").post("/api/v1/policies/validate/", {"spec": {}, "specs": {}}, format="json"),
        400,
    )
    assert errors[0]["code"] == "unknown_field" and errors[0]["field"] == "specs"


def test_wrong_types_and_huge_numbers_name_the_field(world: World) -> None:
    body = {
        "cluster": "sim",
        "namespace": "team-a",
        "name": "x",
        "framework": "pytorch",
        "replicas": {"Master": 10**30},
        "npus_per_pod": "eight",
    }
    errors = assert_error_format(world.client("owner").post("/api/v1/jobs/", body, format="json"), 400)
    assert {(e["field"], e["code"]) for e in errors} == {
        ("replicas.Master", "out_of_range"),
        ("npus_per_pod", "invalid_type"),
    }


def test_wrong_content_type_is_415(world: World) -> None:
    errors = assert_error_format(raw_post(world, "/api/v1/render/", "manifest=x", "text/plain"), 415)
    assert errors[0]["code"] == "unsupported_media_type"


def test_unknown_paths_are_json_404s_with_a_slash_hint(world: World) -> None:
    errors = assert_error_format(world.client("owner").get("/api/v1/jobs"), 404)
    assert "ends with '/'" in errors[0]["message"]
    assert_error_format(world.client("owner").get("/api/v1/nope/"), 404)
    assert_error_format(world.client("owner").get(f"/api/v1/jobs/{2**70}/policy/"), 404)


@pytest.mark.parametrize("query", ["limit=0", "limit=abc", "offset=-1", f"offset={10**30}", "limit=100000"])
def test_bad_pagination_names_the_parameter(world: World, query: str) -> None:
    errors = assert_error_format(world.client("owner").get(f"/api/v1/jobs/?{query}"), 400)
    assert errors[0]["field"] == query.split("=")[0]


@pytest.mark.parametrize("query", ["q=%00", "cluster=" + "9" * 40, "after_seq=-3", "kind=" + "x" * 60])
def test_hostile_filters_are_400s_or_empty(world: World, query: str) -> None:
    path = "/api/v1/jobs/" if query.startswith(("q", "cluster")) else f"/api/v1/jobs/{world.job.pk}/events/"
    response = world.client("owner").get(f"{path}?{query}")
    assert response.status_code in (200, 400)
    if response.status_code == 400:
        assert_error_format(response, 400)


def test_invalid_token_and_bad_header_are_401s(world: World) -> None:
    client = world.client(None)
    for header in ("Token nope", "Token", "Token a b", "Token " + "x" * 500):
        errors = assert_error_format(client.get("/api/v1/jobs/", HTTP_AUTHORIZATION=header), 401)
        assert errors[0]["code"] == "authentication_failed"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)


@HYPOTHESIS
@given(body=json_values)
def test_any_json_body_to_put_policy_is_never_a_server_error(world: World, body: Any) -> None:
    response = world.client("owner").put(f"/api/v1/jobs/{world.job.pk}/policy/", body, format="json")
    assert response.status_code in (200, 400, 409)
    if response.status_code == 400:
        assert_error_format(response, 400)


@HYPOTHESIS
@given(spec=json_values, manifest=json_values | st.text())
def test_any_render_request_is_a_clear_answer(world: World, spec: Any, manifest: Any) -> None:
    response = world.client("owner").post(
        "/api/v1/render/", {"manifest": manifest, "policy": spec}, format="json"
    )
    assert response.status_code in (200, 400)
    if response.status_code == 400:
        errors = assert_error_format(response, 400)
        assert all(e["field"] for e in errors)


@HYPOTHESIS
@given(spec=json_values)
def test_validate_answers_200_for_any_spec(world: World, spec: Any) -> None:
    response = world.client("owner").post("/api/v1/policies/validate/", {"spec": spec}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["valid"] == (not body["errors"])
    json.dumps(body)

"""Issue #24 (low): Unicode digits such as "²" pass ``str.isdigit()`` but not ``int()``; every place
that turns text into a number checks for ASCII digits, and answers a clear 400 naming the parameter."""

from __future__ import annotations

import pytest

from apps.core.numbers import ascii_int, is_ascii_digits
from apps.policies.push import revision_in_annotations
from mindcluster import keys as c
from tests.support.world import JOB_REGISTRATION, World

pytestmark = pytest.mark.django_db

SUPERSCRIPT_TWO = "\u00b2"  # "²": isdigit() is True, int() raises ValueError
ARABIC_THREE = "\u0663"  # "٣": int() accepts it, but no id or count is written that way


def test_the_check_takes_only_ascii_digits() -> None:
    assert SUPERSCRIPT_TWO.isdigit() and ARABIC_THREE.isdigit()  # why str.isdigit() is not enough
    assert [is_ascii_digits(t) for t in ("0", "0123", "", SUPERSCRIPT_TWO, ARABIC_THREE, "1 ", "-1")] == [
        True,
        True,
        False,
        False,
        False,
        False,
        False,
    ]
    assert ascii_int("42") == 42 and ascii_int(SUPERSCRIPT_TWO) is None and ascii_int("9" * 30, 18) is None


def _error(response: object) -> dict[str, object]:
    body = response.json()  # type: ignore[attr-defined]
    [entry] = body["errors"]
    return entry  # type: ignore[no-any-return]


@pytest.mark.parametrize("digit", [SUPERSCRIPT_TWO, ARABIC_THREE])
def test_the_events_job_filter_refuses_unicode_digits_with_400(world: World, digit: str) -> None:
    response = world.client("owner").get("/api/v1/events/", {"job": digit})
    assert response.status_code == 400, response.content
    assert _error(response)["field"] == "job"


@pytest.mark.parametrize("param", ["checkpoint_period_s", "window_days"])
def test_the_advice_parameters_refuse_unicode_digits_with_400(world: World, param: str) -> None:
    response = world.client("owner").get(f"/api/v1/jobs/{world.job.pk}/advice/", {param: SUPERSCRIPT_TWO})
    assert response.status_code == 400, response.content
    entry = _error(response)
    assert entry["field"] == param and "whole number" in str(entry["message"])


def test_the_jobs_cluster_filter_takes_a_unicode_digit_as_a_name(world: World) -> None:
    response = world.client("owner").get("/api/v1/jobs/", {"cluster": SUPERSCRIPT_TWO})
    assert response.status_code == 200, response.content
    assert response.json()["results"] == []


def test_a_job_created_in_cluster_superscript_two_is_a_400_naming_cluster(world: World) -> None:
    body = {**JOB_REGISTRATION, "cluster": SUPERSCRIPT_TWO}
    response = world.client("owner").post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 400, response.content
    assert _error(response)["field"] == "cluster"


def test_a_namespace_default_in_cluster_superscript_two_is_a_404(world: World) -> None:
    response = world.client("owner").get(
        f"/api/v1/clusters/{SUPERSCRIPT_TWO}/namespaces/team-a/default-policy/"
    )
    assert response.status_code == 404, response.content


def test_a_policy_revision_annotation_in_unicode_digits_names_no_revision() -> None:
    """A push that re-read a live object with ``policy-revision: "²"`` crashed and was re-queued forever."""
    for value in (SUPERSCRIPT_TWO, ARABIC_THREE, "", "x", None, 7):
        assert revision_in_annotations({c.ANNOTATION_POLICY_REVISION: value}) is None
    assert revision_in_annotations({c.ANNOTATION_POLICY_REVISION: "12"}) == 12
    assert revision_in_annotations({}) is None

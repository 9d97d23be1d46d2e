"""``GET /api/v1/jobs/{id}/advice/``: viewer permission, parameter errors, the fleet filter."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.accounts.models import NamespaceGrant, Role
from apps.advice.models import AdviceSummary
from apps.advice.services import summaries_refresh_stale
from apps.jobs.models import Cluster, TrainingJob
from tests.support.advice import add_incident, add_revision, month_old_training_job


def client_for(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def viewer(cluster: Cluster) -> User:
    user = User.objects.create_user("viewer", password="pw")
    NamespaceGrant.objects.create(role=Role.VIEWER, user=user, cluster=cluster, namespace="team-a")
    return user


@pytest.fixture
def seeded(job: TrainingJob) -> TrainingJob:
    add_revision(job, {"strategies": [], "fault_scheduling": "grace"}, sync="applied", created_with=True)
    for _ in range(3):
        add_incident(job)
    return job


def test_viewer_reads_advice(seeded: TrainingJob, viewer: User) -> None:
    response = client_for(viewer).get(
        f"/api/v1/jobs/{seeded.pk}/advice/?checkpoint_period_s=1800&window_days=7"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"job", "npus", "current", "candidates", "assumptions", "history"}
    assert body["history"]["faults"] == 3
    assert {a["source"] for a in body["assumptions"]} <= {"measured", "published", "model", "user", "default"}
    costs = [c["expected_lost_npu_hours_per_week"] for c in body["candidates"] if not c["job_fails"]]
    assert costs == sorted(costs)
    assert all(c["why"].endswith(".") for c in body["candidates"])


def test_other_namespace_is_not_found(cluster: Cluster, viewer: User) -> None:
    hidden = month_old_training_job(cluster, "secret", namespace="team-b")
    assert client_for(viewer).get(f"/api/v1/jobs/{hidden.pk}/advice/").status_code == 404


@pytest.mark.parametrize(
    ("query", "field", "code"),
    [
        ("checkpoint_period_s=abc", "checkpoint_period_s", "invalid"),
        ("checkpoint_period_s=10", "checkpoint_period_s", "out_of_range"),
        ("checkpoint_period_s=-5", "checkpoint_period_s", "invalid"),
        ("window_days=0", "window_days", "out_of_range"),
        ("window_days=366", "window_days", "out_of_range"),
        ("window_days=1.5", "window_days", "invalid"),
    ],
)
def test_bad_parameters_are_400_naming_the_field(
    seeded: TrainingJob, viewer: User, query: str, field: str, code: str
) -> None:
    response = client_for(viewer).get(f"/api/v1/jobs/{seeded.pk}/advice/?{query}")
    assert response.status_code == 400, response.content
    error: dict[str, Any] = response.json()["errors"][0]
    assert error["field"] == field and error["code"] == code
    assert field in error["message"] and len(error["allowed"]) == 2


def test_fleet_filter_finds_jobs_whose_policy_matters(
    cluster: Cluster, seeded: TrainingJob, viewer: User
) -> None:
    quiet = month_old_training_job(cluster, "quiet")
    add_revision(quiet, {"strategies": ["retry"]}, sync="applied", created_with=True)
    # The beat task prices jobs with new incidents (and only those).
    assert summaries_refresh_stale() == 1
    summary = AdviceSummary.objects.get(job=seeded)
    assert summary.could_save > 1 and summary.best["strategies"]
    assert summaries_refresh_stale() == 0  # nothing changed since
    client = client_for(viewer)
    ids = [j["id"] for j in client.get("/api/v1/jobs/?could_save_min=1").json()["results"]]
    assert ids == [seeded.pk]
    all_ids = {j["id"] for j in client.get("/api/v1/jobs/").json()["results"]}
    assert all_ids == {seeded.pk, quiet.pk}
    bad = client.get("/api/v1/jobs/?could_save_min=-1")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "could_save_min"
    # A new incident makes the figure stale again.
    add_incident(seeded)
    assert summaries_refresh_stale() == 1

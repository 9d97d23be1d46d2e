"""The web app answers: health, API root, admin login."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_healthz_is_readyz_and_reports_database_and_redis(client: Client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["redis"] == "ok"  # the test Redis is real


def test_api_root_lists_releases_and_strategies(client: Client) -> None:
    body = client.get("/api/v1/").json()
    assert body["mindcluster_releases"] == ["7.0", "7.1", "7.2", "7.3", "26.0", "26.1"]
    assert body["strategies"] == ["retry", "recover-in-place", "recover", "elastic-training", "dump", "exit"]


def test_admin_login_page_renders(client: Client) -> None:
    assert client.get("/admin/login/").status_code == 200

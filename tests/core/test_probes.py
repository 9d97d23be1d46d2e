"""/livez and /readyz answer the kubelet: its Host is the pod IP, which ALLOWED_HOSTS never lists."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import Client, override_settings

from apps.core import health

pytestmark = pytest.mark.django_db

# What the kubelet sends for `httpGet: {port: 8000}`: the pod's IP and the port (the probe's `host`
# defaults to the pod IP; kubernetes pkg/probe/http/request.go).
KUBELET_HOST = "10.244.3.17:8000"


@pytest.fixture
def failing_check() -> Iterator[str]:
    def broken() -> str:
        raise ConnectionRefusedError("no route")

    health.register_check("test-broken", broken)
    yield "test-broken"
    health._CHECKS.pop("test-broken")


@override_settings(ALLOWED_HOSTS=["recovery.example.com"])
@pytest.mark.parametrize("path", ["/livez", "/readyz", "/healthz"])
def test_a_probe_from_the_pod_ip_is_answered(path: str) -> None:
    response = Client().get(path, HTTP_HOST=KUBELET_HOST)
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "ok"


@override_settings(ALLOWED_HOSTS=["recovery.example.com"])
def test_every_other_path_still_refuses_a_host_outside_allowed_hosts() -> None:
    assert Client().get("/api/v1/", HTTP_HOST=KUBELET_HOST).status_code == 400
    assert Client().post("/readyz", HTTP_HOST=KUBELET_HOST).status_code == 400  # only GET/HEAD bypass


def test_livez_touches_no_database(django_assert_num_queries) -> None:  # type: ignore[no-untyped-def]
    with django_assert_num_queries(0):
        assert Client().get("/livez").status_code == 200


def test_readyz_checks_the_database_redis_and_the_threads() -> None:
    body = Client().get("/readyz").json()
    assert body["checks"] == {"database": "ok", "redis": "ok", "threads": "ok"}


def test_a_failing_check_makes_readyz_503_and_names_it_but_livez_stays_up(failing_check: str) -> None:
    response = Client().get("/readyz", HTTP_HOST=KUBELET_HOST)
    assert response.status_code == 503
    assert response.json()["checks"][failing_check] == "error: ConnectionRefusedError"
    assert Client().get("/livez", HTTP_HOST=KUBELET_HOST).status_code == 200


@override_settings(REDIS_URL="redis://127.0.0.1:1/0")
def test_an_unreachable_redis_is_not_ready() -> None:
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["redis"].startswith("error: ")

"""Issue #24 (lows): the API's throttle counts live in the shared Redis cache, not in each process.

With the old per-process LocMemCache every web process (and every gunicorn worker) had a budget of
its own, so N processes allowed N times the configured rate. A second Python process here spends
part of one token's budget; the test process sees it spent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from django.core.cache import cache, caches
from rest_framework.test import APIClient

from apps.accounts.services import token_issue
from tests.support import REPO_ROOT
from tests.support.processes import test_database_url
from tests.support.world import World

pytestmark = pytest.mark.django_db(transaction=True)  # the other process reads the token's row
RATE = "5/min"

# The other process: Django's test client over the same settings and database, three requests.
OTHER_PROCESS = """
import json, sys, django
django.setup()
from rest_framework.test import APIClient
client = APIClient(SERVER_NAME="localhost")
client.credentials(HTTP_AUTHORIZATION="Token " + sys.argv[1])
print(json.dumps([client.get("/api/v1/clusters/").status_code for _ in range(3)]))
"""


def requests_from_another_process(key: str) -> list[int]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "controlplane.settings.test",
        "DATABASE_URL": test_database_url(),
        "API_THROTTLE_RATE": RATE,
        "API_USER_THROTTLE_RATE": "100/min",
    }
    done = subprocess.run(
        [sys.executable, "-c", OTHER_PROCESS, key],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_two_processes_share_one_tokens_throttle_count(world: World, settings: Any) -> None:
    cache.clear()
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"token": RATE, "user": "100/min"},
    }
    _, key = token_issue(world.users["owner"], "shared-budget")
    here = APIClient(SERVER_NAME="localhost")
    here.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert [here.get("/api/v1/clusters/").status_code for _ in range(3)] == [200, 200, 200]
    # 3 of 5 spent here: the other process gets the 2 left, then 429.
    assert requests_from_another_process(key) == [200, 200, 429]
    assert here.get("/api/v1/clusters/").status_code == 429  # and its requests counted here too
    cache.clear()


def test_clearing_the_cache_deletes_only_its_own_keys(settings: Any) -> None:
    """The cache shares its Redis database with the broker and the channel layer by default."""
    raw = caches["default"]._cache.get_client(None, write=True)  # type: ignore[attr-defined]
    raw.set("not-the-cache:queue", "kept")
    cache.set("mine", 1)
    try:
        cache.clear()
        assert cache.get("mine") is None
        assert raw.get("not-the-cache:queue") == b"kept"
    finally:
        raw.delete("not-the-cache:queue")


def test_an_unreachable_cache_lets_requests_through(world: World, settings: Any) -> None:
    settings.CACHES = {
        "default": {
            **settings.CACHES["default"],
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
        }
    }
    assert world.client("owner").get("/api/v1/clusters/").status_code == 200

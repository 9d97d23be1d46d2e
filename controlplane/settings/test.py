"""Test settings: the same as base, with backends swapped for speed and isolation only.

PostgreSQL and Redis stay real (their URLs come from the environment, set by bootstrap.py test);
tests use their own Redis database number so a running dev worker never steals a test's task.
"""

from __future__ import annotations

import os

# Before base is imported: with DEBUG=false, base refuses to load without a real SECRET_KEY.
# Subprocesses the tests start (workers, servers) inherit this one key.
os.environ.setdefault("SECRET_KEY", "tests-only-secret-key-7f3c9a1e5b2d8406-not-for-production")

from controlplane.env import env_bool, env_str
from controlplane.settings.base import *  # noqa: F403

# The simulated cluster's management commands (simcluster, sim_fault): a tool for tests and local runs,
# never installed in production (controlplane.settings.base).
INSTALLED_APPS = [*INSTALLED_APPS, "simcluster"]  # noqa: F405
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast; test users only
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
TEST_REDIS_URL = env_str("TEST_REDIS_URL", "redis://127.0.0.1:6379/13")
CELERY_BROKER_URL = TEST_REDIS_URL
CHANNEL_LAYERS["default"]["CONFIG"]["hosts"] = [TEST_REDIS_URL]  # noqa: F405
CACHES["default"]["LOCATION"] = TEST_REDIS_URL  # noqa: F405
LOGGING["root"]["level"] = "WARNING"  # noqa: F405
if "LOG_FORMAT" not in os.environ:  # a failing test's captured log is read by a person
    LOGGING["handlers"]["console"]["formatter"] = "plain"  # noqa: F405
# Most tests run inside a transaction, where the copies are never used; the ones that test them turn
# them on (tests/accounts/test_token_cache.py), so no test's listener holds the test database open.
AUTH_TOKEN_CACHE = env_bool("AUTH_TOKEN_CACHE", default=False)
WEBHOOK_ALLOW_PRIVATE_TARGETS = True  # test receivers listen on 127.0.0.1; the rule has its own tests

# Under pytest-xdist every worker process (PYTEST_XDIST_WORKER = gw0, gw1, ...) gets its own key space
# in the shared test Redis, so one worker's Celery queues and channel groups are never another's.
# The servers and workers a test starts inherit the variable, so they share their test's key space.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if XDIST_WORKER:
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        **CELERY_BROKER_TRANSPORT_OPTIONS,  # noqa: F405
        "global_keyprefix": f"{XDIST_WORKER}:",
    }
    CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = f"asgi-{XDIST_WORKER}"  # noqa: F405
    CACHES["default"]["KEY_PREFIX"] = f"cache-{XDIST_WORKER}"  # noqa: F405

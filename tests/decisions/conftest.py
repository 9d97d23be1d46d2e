"""Reuse the write-path fixtures (private Redis, real Celery workers) and the API personas."""

from tests.api.conftest import superuser_client, world
from tests.push.conftest import broker, worker_factory

__all__ = ["broker", "superuser_client", "worker_factory", "world"]

"""Reuse the write-path fixtures: private Redis broker and real Celery workers."""

from tests.push.conftest import broker, worker_factory

__all__ = ["broker", "worker_factory"]

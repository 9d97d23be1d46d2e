"""One Redis connection pool per process, however many cache objects Django makes (apps/core/cache.py).

Django keeps its cache objects in an asgiref ``Local`` that is a context variable, and the HTTP
thread pool (a2wsgi, a2wsgi/wsgi.py: ``contextvars.copy_context()`` per request) runs each request
in a context of its own: before this, every API request built a cache object, a pool and a new
Redis connection that nothing closed, until Redis answered "max number of clients reached"
(bench/bench_api.py, within a minute at 300 req/s) and throttles and in-effect lookups failed open.
"""

from __future__ import annotations

import contextvars
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.core.cache import cache, caches

from apps.core.cache import sliding_window_hit

REQUESTS = 200
THREADS = 8


def _one_request(key: str) -> tuple[int, int, int]:
    """What one request in a fresh context does with the cache: a throttle hit and a lookup."""
    sliding_window_hit(key, 60, 10_000, 1_800_000_000.0)
    cache.get(key)
    backend = caches["default"]
    client = backend._cache  # type: ignore[attr-defined]
    pool = client._get_connection_pool(True)
    return id(backend), id(client), id(pool)


@pytest.mark.usefixtures("db")
def test_requests_in_fresh_contexts_share_one_client_and_pool() -> None:
    key = f"test-pool-{uuid.uuid4()}"
    with ThreadPoolExecutor(THREADS) as threads:
        seen = list(threads.map(lambda _: contextvars.Context().run(_one_request, key), range(REQUESTS)))
    backends = {backend for backend, _, _ in seen}
    clients = {client for _, client, _ in seen}
    pools = {pool for _, _, pool in seen}
    assert len(backends) > THREADS  # Django's own behaviour: a cache object per context
    assert len(clients) == 1 and len(pools) == 1
    pool = caches["default"]._cache._get_connection_pool(True)  # type: ignore[attr-defined]
    # At most one connection per thread that used it at once, not one per request.
    assert len(pool._available_connections) + len(pool._in_use_connections) <= THREADS

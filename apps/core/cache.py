"""The shared cache (Redis): DRF's throttle counts live here, so every web process counts together.

Django's built-in ``RedisCache``, with one change: ``clear()`` deletes only this cache's own keys
(its ``KEY_PREFIX``). The built-in one runs ``FLUSHDB``, and the cache shares its Redis database
with the Celery broker and the channel layer by default (``REDIS_URL``), so a clear would drop
queued tasks and websocket groups.
"""

from __future__ import annotations

from django.core.cache.backends.redis import RedisCache

_DELETE_BATCH = 500


def _glob_escape(text: str) -> str:
    return "".join(f"\\{char}" if char in "*?[]\\" else char for char in text)


class PrefixedRedisCache(RedisCache):
    def clear(self) -> None:
        if not self.key_prefix:
            raise ValueError("a shared Redis cache needs a KEY_PREFIX: clear() would delete every key")
        client = self._cache.get_client(None, write=True)
        batch: list[bytes] = []
        for key in client.scan_iter(match=f"{_glob_escape(self.key_prefix)}:*", count=_DELETE_BATCH):
            batch.append(key)
            if len(batch) >= _DELETE_BATCH:
                client.delete(*batch)
                batch = []
        if batch:
            client.delete(*batch)

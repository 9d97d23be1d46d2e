"""The shared cache (Redis): DRF's throttle counts live here, so every web process counts together.

Django's built-in ``RedisCache``, with two changes: ``clear()`` deletes only this cache's own keys
(its ``KEY_PREFIX``). The built-in one runs ``FLUSHDB``, and the cache shares its Redis database
with the Celery broker and the channel layer by default (``REDIS_URL``), so a clear would drop
queued tasks and websocket groups. And one ``redis.Redis`` per connection pool, not one per command:
building one fills a table of ~170 response callbacks, and the two throttles of every API request
make four commands (bench/profile_api.py: 0.15 ms of CPU per request).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django.utils.functional import cached_property

_DELETE_BATCH = 500


def _glob_escape(text: str) -> str:
    return "".join(f"\\{char}" if char in "*?[]\\" else char for char in text)


class _OneClientPerPool(RedisCacheClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        # A client holds no connection of its own (the pool does), so one is safe to share. The
        # private helpers are Django's (django/core/cache/backends/redis.py); its stubs omit them.
        index = self._get_connection_pool_index(write)  # type: ignore[attr-defined]
        client = self._clients.get(index)
        if client is None:
            pool = self._get_connection_pool(write)  # type: ignore[attr-defined]
            client = self._clients[index] = self._client(connection_pool=pool)  # type: ignore[attr-defined]
        return client


# One client (and so one connection pool per server) per process and configuration, whatever number
# of cache objects Django makes. Django keeps its cache objects in an asgiref ``Local`` that is not
# thread-critical: a context variable. The HTTP thread pool (a2wsgi) runs each request in a fresh
# context, so every request got a cache object of its own, with a pool of its own, and a new TCP
# connection to Redis that nothing closed: under bench/bench_api.py's load Redis refused clients
# ("max number of clients reached") within a minute, and every throttle and in-effect lookup paid a
# connect (17 % of the job detail's time in a py-spy profile).
_SHARED_CLIENTS: dict[tuple[tuple[str, ...], str], _OneClientPerPool] = {}
_SHARED_LOCK = threading.Lock()


class PrefixedRedisCache(RedisCache):
    def __init__(self, server: Any, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _OneClientPerPool
        # What RedisCache.__init__ parsed (its stubs do not declare the attributes).
        self._client_args: tuple[list[str], dict[str, Any]] = (
            list(getattr(self, "_servers")),  # noqa: B009
            dict(getattr(self, "_options")),  # noqa: B009
        )

    @cached_property
    def _cache(self) -> _OneClientPerPool:
        # redis-py's pools are thread-safe and start afresh in a forked child (they check the pid).
        servers, options = self._client_args
        key = (tuple(servers), repr(sorted(options.items())))
        with _SHARED_LOCK:
            client = _SHARED_CLIENTS.get(key)
            if client is None:
                client = _SHARED_CLIENTS[key] = _OneClientPerPool(servers, **options)
        return client

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


def sliding_window_hit(key: str, seconds: int, allowed: int, now: float) -> bool:
    """Count a hit of ``key`` unless that would exceed ``allowed`` per ``seconds``; True = counted.

    A sliding window estimated from two fixed ones (this window's count plus the previous one's,
    weighted by how much of it still overlaps the last ``seconds``): one round trip (a script of
    INCR, EXPIRE, GET) with constant-size values, where DRF's throttle reads and rewrites its whole
    list of timestamps twice per request (at 1,200/min, 10 KB of pickle per bucket and request). A
    refused hit is taken back, as DRF does not count refused requests.
    """
    return sliding_window_hits([(key, seconds, allowed)], now)[0]


# Per bucket (KEYS: this window's counter, the previous one's; ARGV: its expiry, its limit, how much
# of the previous window still overlaps): count the hit, refuse it if the estimate is over the limit,
# and take a refused hit back at once, as DRF does not count refused requests. One command for all
# buckets: Redis runs a script without interleaving another client's commands, so a hit taken back is
# never seen by anyone else.
_HITS_LUA = """
local verdicts = {}
for i = 1, #KEYS / 2 do
  local current, previous = KEYS[2 * i - 1], KEYS[2 * i]
  local expiry, allowed, overlap = ARGV[3 * i - 2], tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i])
  local count = redis.call('INCR', current)
  redis.call('EXPIRE', current, expiry, 'NX')
  local before = tonumber(redis.call('GET', previous) or '0')
  if count + before * overlap <= allowed then
    verdicts[i] = 1
  else
    redis.call('DECR', current)
    verdicts[i] = 0
  end
end
return verdicts
"""
_SCRIPTS: dict[int, Any] = {}  # per redis client (one per pool): its registered script


def sliding_window_hits(buckets: Sequence[tuple[str, int, int]], now: float) -> list[bool]:
    """``sliding_window_hit`` for several ``(key, seconds, allowed)`` buckets in one round trip.

    Each bucket is decided on its own, as if hit alone (one refusing does not stop another from
    counting, as DRF checks every throttle). The API's two throttles (per token, per user) share one
    call this way, a script (``_HITS_LUA``) rather than a pipeline of six commands: redis-py's
    encoding and decoding of each command was most of a request's throttling CPU (bench/profile_api.py).
    """
    from django.core.cache import cache

    if not buckets:
        return []
    keys: list[str] = []
    args: list[str] = []
    for key, seconds, allowed in buckets:
        started = int(now) // seconds * seconds
        keys.append(cache.make_and_validate_key(f"{key}:{started}"))
        keys.append(cache.make_and_validate_key(f"{key}:{started - seconds}"))
        args += [str(2 * seconds + 1), str(allowed), repr(1.0 - (now - started) / seconds)]
    client = cache._cache.get_client(keys[0], write=True)  # type: ignore[attr-defined]
    script = _SCRIPTS.get(id(client))
    if script is None:
        script = _SCRIPTS.setdefault(id(client), client.register_script(_HITS_LUA))
    return [bool(verdict) for verdict in script(keys=keys, args=args)]

"""Fair-share throttling: one bucket per token (per user for sessions, per address for anonymous),
and one per user over all of its tokens, so minting more tokens does not buy more requests."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from redis.exceptions import RedisError
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from apps.accounts.models import ApiToken
from apps.core.cache import sliding_window_hit

if TYPE_CHECKING:
    from rest_framework.views import APIView

log = logging.getLogger(__name__)


def _configured_rate(scope: str) -> str | None:
    """The rate ("100/min") set for ``scope``; DRF's settings type allows numbers, ours are strings."""
    rate = api_settings.DEFAULT_THROTTLE_RATES.get(scope)
    return None if rate is None else str(rate)


class _SharedCountThrottle(SimpleRateThrottle):
    """Counts in the shared Redis cache (``CACHES``); when Redis cannot be reached the request is let
    through (and logged): a cache outage must not turn every API call into a 500."""

    def allow_request(self, request: Request, view: APIView) -> bool:
        try:
            return self._allow(request, view)
        except RedisError as exc:
            log.warning("throttle %s: the shared cache is unreachable (%s); not counting", self.scope, exc)
            return True

    def _allow(self, request: Request, view: APIView) -> bool:
        # Two counters (apps/core/cache.py: one O(1) round trip) instead of DRF's list of every
        # timestamp in the window, read and written back on each request.
        if self.rate is None:
            return True
        allowed, duration = self.parse_rate(self.rate)
        key = self.get_cache_key(request, view)
        if key is None or allowed is None or not duration:
            return True
        self.now = self.timer()
        self.window_ends = (int(self.now) // duration + 1) * duration
        return sliding_window_hit(key, duration, allowed, self.now)

    def wait(self) -> float | None:
        return max(1.0, self.window_ends - self.timer())


class TokenRateThrottle(_SharedCountThrottle):
    """Each token gets its own budget, so one busy pipeline cannot starve the others of the same user."""

    scope = "token"

    def get_rate(self) -> str | None:
        # Read at call time (not class creation) so settings overrides and env changes are honoured.
        return _configured_rate(self.scope)

    def get_cache_key(self, request: Request, view: APIView) -> str:
        if isinstance(request.auth, ApiToken):
            ident = f"token:{request.auth.pk}"
        elif request.user is not None and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            ident = f"anon:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


class UserRateThrottle(_SharedCountThrottle):
    """Every authenticated user's requests, over all tokens and the session (issue #16).

    Anonymous requests are left to the token-scope bucket (per address). No ``user`` rate
    configured means no per-user limit.
    """

    scope = "user"

    def get_rate(self) -> str | None:
        return _configured_rate(self.scope)

    def _allow(self, request: Request, view: APIView) -> bool:
        self.rate = self.get_rate()
        if self.rate is None:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super()._allow(request, view)

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        if request.user is None or not request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": f"user:{request.user.pk}"}

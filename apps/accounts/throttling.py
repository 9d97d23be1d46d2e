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
from apps.core.cache import sliding_window_hits

if TYPE_CHECKING:
    from rest_framework.views import APIView

log = logging.getLogger(__name__)


def _configured_rate(scope: str) -> str | None:
    """The rate ("100/min") set for ``scope``; DRF's settings type allows numbers, ours are strings."""
    rate = api_settings.DEFAULT_THROTTLE_RATES.get(scope)
    return None if rate is None else str(rate)


# Where the first shared throttle of a request leaves every shared throttle's verdict (scope ->
# (counted, window end)), so the others answer without a round trip of their own.
_VERDICTS = "_shared_throttle_verdicts"


class _SharedCountThrottle(SimpleRateThrottle):
    """Counts in the shared Redis cache (``CACHES``); when Redis cannot be reached the request is let
    through (and logged): a cache outage must not turn every API call into a 500."""

    scope: str  # each one has a scope: the key of its verdict

    def allow_request(self, request: Request, view: APIView) -> bool:
        try:
            return self._allow(request, view)
        except RedisError as exc:
            log.warning("throttle %s: the shared cache is unreachable (%s); not counting", self.scope, exc)
            return True

    def bucket(self, request: Request, view: APIView) -> tuple[str, int, int] | None:
        """This throttle's ``(key, seconds, allowed)`` for ``request``; None = not limited."""
        # The rate is read at call time (not class creation) so settings overrides are honoured.
        self.rate = self.get_rate()
        if self.rate is None:
            return None
        allowed, duration = self.parse_rate(self.rate)
        key = self.get_cache_key(request, view)
        if key is None or allowed is None or not duration:
            return None
        return key, duration, allowed

    def _allow(self, request: Request, view: APIView) -> bool:
        # Two counters per bucket (apps/core/cache.py) instead of DRF's list of every timestamp in
        # the window; and the view's shared throttles all in the first one's round trip.
        verdicts: dict[str, tuple[bool, float]] = getattr(request, _VERDICTS, {})
        if self.scope not in verdicts:
            verdicts = self._decide_all(request, view)
            setattr(request, _VERDICTS, verdicts)
        # Taken, not read: a second check of the same request counts again, as DRF's throttles do.
        counted, self.window_ends = verdicts.pop(self.scope)
        return counted

    def _decide_all(self, request: Request, view: APIView) -> dict[str, tuple[bool, float]]:
        others = [t for t in view.get_throttles() if isinstance(t, _SharedCountThrottle)]
        throttles = [self, *(t for t in others if t.scope != self.scope)]
        now = self.timer()
        limited: list[tuple[str, float, tuple[str, int, int]]] = []
        verdicts: dict[str, tuple[bool, float]] = {}
        for throttle in throttles:
            bucket = throttle.bucket(request, view)
            if bucket is None:
                verdicts[throttle.scope] = (True, now)
            else:
                limited.append((throttle.scope, (int(now) // bucket[1] + 1) * bucket[1], bucket))
        counted = sliding_window_hits([bucket for _, _, bucket in limited], now)
        for (scope, window_ends, _), ok in zip(limited, counted, strict=True):
            verdicts[scope] = (ok, window_ends)
        return verdicts

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

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        if request.user is None or not request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": f"user:{request.user.pk}"}

"""Who may open a websocket: same-origin browsers, and programs that present a token."""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddleware
from channels.security.websocket import AllowedHostsOriginValidator
from channels.sessions import CookieMiddleware, InstanceSessionWrapper, SessionMiddleware


class SameOriginOrTokenValidator:
    """Refuse a foreign ``Origin`` always; allow a missing one only with ``Authorization: Token``.

    Browsers always send ``Origin`` (so cross-site websocket hijacking is refused); programs such as
    pipelines send the same ``Authorization: Token <key>`` header as for REST and no ``Origin``
    (design.md §4.3). The token itself is checked later by the token middleware.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.validated = AllowedHostsOriginValidator(inner)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> Any:  # an ASGI websocket scope
        headers = dict(scope.get("headers") or [])
        has_origin = b"origin" in headers
        token = headers.get(b"authorization", b"").split(b" ", 1)[0].lower() == b"token"
        if not has_origin and token:
            return await self.inner(scope, receive, send)
        return await self.validated(scope, receive, send)


class WebsocketSessionMiddleware(SessionMiddleware):
    """Channels' ``SessionMiddleware`` without its wrapper around every ``send`` of a websocket.

    The wrapper saves the session and sets its cookie on ``http.response.start``, which a websocket
    never sends, yet it reads the session's ``modified`` and ``is_empty()`` through a ``LazyObject``
    on every frame sent: at 100 sockets x 200 events/s that is 20,000 useless checks a second
    (py-spy on bench/bench_events.py). The session is still resolved into ``scope["session"]`` for
    ``AuthMiddleware`` and the consumer; nothing on the websocket path writes it.
    """

    async def __call__(self, scope: Any, receive: Any, send: Any) -> Any:
        wrapper = InstanceSessionWrapper(scope, send)
        await wrapper.resolve_session()
        inner: Any = self.inner  # the stub types it as an ASGI2 application
        return await inner(wrapper.scope, receive, send)


def websocket_auth_stack(inner: Any) -> Any:
    """``channels.auth.AuthMiddlewareStack`` (cookies → session → user) with the session middleware above."""
    return CookieMiddleware(WebsocketSessionMiddleware(AuthMiddleware(inner)))

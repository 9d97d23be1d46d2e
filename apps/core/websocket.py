"""Who may open a websocket: same-origin browsers, and programs that present a token."""

from __future__ import annotations

from typing import Any

from channels.security.websocket import AllowedHostsOriginValidator


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

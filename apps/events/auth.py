"""Websocket authentication by ``Authorization: Token <key>``, resolved through ``apps.accounts``.

Browsers authenticate with their session (``AuthMiddlewareStack`` in ``controlplane/asgi.py``);
programs send the same header as for REST. A bad token is an error, not a fall-back to the session:
the consumer refuses the handshake and the reason is kept in ``scope["auth_error"]``.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth.models import AnonymousUser

KEYWORD = b"token"


def _token_user(key: str) -> tuple[Any, str]:
    from rest_framework.exceptions import AuthenticationFailed

    from apps.accounts.authentication import TokenAuthentication

    try:
        user, _token = TokenAuthentication().authenticate_key(key)
    except AuthenticationFailed as exc:
        return AnonymousUser(), str(exc.detail)
    return user, ""


class TokenAuthMiddleware:
    """ASGI middleware: replace ``scope["user"]`` when an ``Authorization: Token`` header is present."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        header = next((value for name, value in scope.get("headers", []) if name == b"authorization"), None)
        if header is not None:
            parts = header.split()
            if len(parts) == 2 and parts[0].lower() == KEYWORD:
                try:
                    key = parts[1].decode("ascii")
                except UnicodeDecodeError:
                    key = ""
                user, error = (
                    await database_sync_to_async(_token_user)(key) if key else (AnonymousUser(), "bad key")
                )
                scope = {**scope, "user": user, "auth_error": error, "auth_method": "token"}
            else:
                scope = {**scope, "user": AnonymousUser(), "auth_error": "expected 'Token <key>'"}
        return await self.inner(scope, receive, send)

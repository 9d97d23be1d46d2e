"""Websocket authentication by ``Authorization: Token <key>``, resolved through ``apps.accounts``.

Browsers authenticate with their session (``websocket_auth_stack`` in ``controlplane/asgi.py``);
programs send the same header as for REST. A bad token is an error, not a fall-back to the session:
the consumer refuses the handshake and the reason is kept in ``scope["auth_error"]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth.models import AnonymousUser

KEYWORD = b"token"


def _token_user(key: str) -> tuple[Any, str, int | None]:
    from rest_framework.exceptions import AuthenticationFailed

    from apps.accounts.authentication import TokenAuthentication

    try:
        user, token = TokenAuthentication().authenticate_key(key)
    except AuthenticationFailed as exc:
        return AnonymousUser(), str(exc.detail), None
    return user, "", token.pk


@dataclass
class Access:
    """What an open socket may still do: ``reason`` says why not when ``allowed`` is false."""

    allowed: bool
    reason: str = ""
    user: Any = None
    visible: set[int] = field(default_factory=set)  # of the job ids asked about


def socket_access(
    *, user_id: int, token_id: int | None, session_key: str | None, job_ids: list[int]
) -> Access:
    """Recheck, from the database, what a socket was allowed when it opened (issue #16).

    The user must still be active; a token-authenticated socket's token must still be unrevoked and
    unexpired; a session-authenticated socket's session must still exist (signing out deletes it)
    and match the user's password (changing it signs out every other session).
    ``visible`` is the subset of ``job_ids`` the user may still see (grants change too).
    """
    from django.contrib.auth import get_user_model

    from apps.accounts.models import ApiToken
    from apps.events.selectors import jobs_visible_to

    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None or not user.is_active:
        return Access(False, "the user account was disabled")
    if token_id is not None:
        token = ApiToken.objects.filter(pk=token_id).first()
        if token is None or token.revoked_at is not None:
            return Access(False, "the token was revoked")
        if token.is_expired:
            return Access(False, "the token expired")
    if session_key is not None:
        from importlib import import_module

        from django.conf import settings
        from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY
        from django.utils.crypto import constant_time_compare

        data = import_module(settings.SESSION_ENGINE).SessionStore(session_key).load()
        if not data or str(data.get(SESSION_KEY)) != str(user.pk):
            return Access(False, "the session ended (signed out)")
        # What Django checks on every HTTP request: a password change ends the other sessions.
        if not constant_time_compare(str(data.get(HASH_SESSION_KEY, "")), user.get_session_auth_hash()):
            return Access(False, "the password was changed")
    visible: set[int] = set()
    if job_ids:
        visible = set(jobs_visible_to(user).filter(pk__in=job_ids).values_list("pk", flat=True))
    return Access(True, user=user, visible=visible)


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
                user, error, token_id = (
                    await database_sync_to_async(_token_user)(key)
                    if key
                    else (AnonymousUser(), "bad key", None)
                )
                scope = {
                    **scope,
                    "user": user,
                    "auth_error": error,
                    "auth_method": "token",
                    "auth_token_id": token_id,
                }
            else:
                scope = {**scope, "user": AnonymousUser(), "auth_error": "expected 'Token <key>'"}
        return await self.inner(scope, receive, send)

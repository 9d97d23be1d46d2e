"""``Authorization: Token <key>`` for programs; ``request.auth`` is the ``ApiToken`` (its name is audited)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet, TextField
from django.db.models.expressions import RawSQL
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from apps.accounts.models import ApiToken
from apps.accounts.selectors import grants_json_sql, remember_grant_rows
from apps.accounts.services import hash_key
from apps.accounts.token_cache import (
    CachedLookup,
    cached_lookup,
    lookup_generation,
    remember,
    token_columns,
    token_from,
    user_columns,
)
from apps.core.compiled import CompiledQuery

KEYWORD = "Token"
# last_used_at is informational: writing it on every request would turn every GET into a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)
_MAX_KEY_LENGTH = 200


# The name under which the token's lookup selects its user's grants.
_GRANTS = "user_grants_json"


def _token_by_hash(key_hash: str) -> QuerySet[ApiToken]:
    tokens = ApiToken.objects.select_related("user").filter(key_hash=key_hash)
    if connection.vendor == "postgresql":
        # With the user's grants: every API request needs them, and this saves their round trip.
        user_id = f'"{ApiToken._meta.db_table}"."user_id"'
        tokens = tokens.annotate(**{_GRANTS: RawSQL(grants_json_sql(user_id), (), output_field=TextField())})
    return tokens[:1]


# Every API request makes this lookup: compiled once (apps/core/compiled.py). key_hash is unique.
_TOKEN_BY_HASH = CompiledQuery(_token_by_hash, str)


class TokenAuthentication(authentication.BaseAuthentication):
    """Look the key up by its SHA-256; revoked, expired or inactive-user tokens get a clear 401."""

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != KEYWORD.lower().encode():
            return None  # not ours: let the session (or nobody) authenticate
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(
                "Malformed Authorization header: expected 'Token <key>' with exactly one key."
            )
        try:
            key = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed(
                "Invalid token: the key contains non-ASCII bytes."
            ) from None
        if len(key) > _MAX_KEY_LENGTH:
            raise exceptions.AuthenticationFailed("Invalid token.")
        return self.authenticate_key(key)

    def authenticate_key(self, key: str) -> tuple[Any, ApiToken]:
        key_hash = hash_key(key)
        kept = cached_lookup(key_hash)
        token: ApiToken | None
        if kept is not None:
            token, grants_json = token_from(kept), kept.grants_json
        else:
            generation = lookup_generation()  # before the statement: a change after it must win
            token, grants_json = _looked_up(key_hash)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if token.revoked_at is not None:
            raise exceptions.AuthenticationFailed(
                f"The token {token.name!r} ({token.prefix}…) was revoked; create a new one."
            )
        if token.is_expired:
            raise exceptions.AuthenticationFailed(
                f"The token {token.name!r} ({token.prefix}…) expired at "
                f"{token.expires_at:%Y-%m-%d %H:%M} UTC; "
                "create a new one."
            )
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("The token's user account is disabled.")
        if grants_json is not None:
            remember_grant_rows(token.user, grants_json)
        touched = _touch(token)
        if kept is None:  # kept for this process's next requests unless something changed meanwhile
            remember(
                key_hash,
                CachedLookup(token_columns(token), user_columns(token.user), grants_json),
                generation,
            )
        elif touched:
            kept.token = token_columns(token)  # its last_used_at, so the next request does not write it
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        # Having a WWW-Authenticate challenge makes DRF answer 401 (not 403) to anonymous requests.
        return KEYWORD


def _looked_up(key_hash: str) -> tuple[ApiToken | None, str | None]:
    """The token of ``key_hash`` (with its user) and the user's grants as JSON, from the database."""
    found = _TOKEN_BY_HASH(key_hash)
    if not found:
        return None, None
    token = found[0]
    return token, token.__dict__.pop(_GRANTS, None)


def _touch(token: ApiToken) -> bool:
    """Record that ``token`` was used, at most once per ``LAST_USED_RESOLUTION``; True if it wrote."""
    now = timezone.now()
    if token.last_used_at is not None and now - token.last_used_at < LAST_USED_RESOLUTION:
        return False
    stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
    ApiToken.objects.filter(stale, pk=token.pk).update(last_used_at=now)
    token.last_used_at = now
    return True


def token_name_of(request: Request) -> str:
    """The name of the token that authenticated this request, or "" (session or anonymous)."""
    auth = getattr(request, "auth", None)
    return auth.name if isinstance(auth, ApiToken) else ""

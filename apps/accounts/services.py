"""Writes on tokens: issue and revoke. The plaintext key exists only in what ``token_issue`` returns."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.accounts.models import ApiToken
from apps.audit.actors import Actor
from apps.audit.services import audit_record
from apps.core.errors import ApplicationError

KEY_PREFIX_LENGTH = 8


class TooManyTokens(ApplicationError):
    """The user already holds ``API_TOKENS_PER_USER`` active tokens."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(
            f"You already have {limit} active tokens, the most one user may hold; "
            "revoke tokens you no longer use and try again."
        )


def active_tokens_of(user: User) -> int:
    now = timezone.now()
    return (
        ApiToken.objects.filter(user=user, revoked_at__isnull=True)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .count()
    )


def capped_expiry(requested: datetime | None, parent: ApiToken | None) -> datetime | None:
    """A token minted with another token lives no longer than it (else one leaked key is forever)."""
    if parent is None or parent.expires_at is None:
        return requested
    if requested is None:
        return parent.expires_at
    return min(requested, parent.expires_at)


def hash_key(key: str) -> str:
    """SHA-256 hex digest: keys are long random strings, so a fast hash is enough (no dictionary to guess)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _new_key() -> str:
    # 32 random bytes, URL-safe: fits in a header, and the first 8 characters identify it in lists.
    return secrets.token_urlsafe(32)


@transaction.atomic
def token_issue(
    user: User,
    name: str,
    expires_at: datetime | None = None,
    *,
    actor: Actor | None = None,
    parent: ApiToken | None = None,
) -> tuple[ApiToken, str]:
    """Create a token for ``user``; returns the row and the key, which is never stored or shown again.

    ``actor``: who asks (the audit trail's actor); ``user`` themselves when not given.
    ``parent``: the token that authenticated the request, whose expiry caps the new one's. Refused
    with ``TooManyTokens`` when the user holds ``API_TOKENS_PER_USER`` active tokens already.
    """
    limit = settings.API_TOKENS_PER_USER
    # The user's row is the lock: two concurrent requests cannot both take the last free place.
    get_user_model().objects.select_for_update().filter(pk=user.pk).first()
    if active_tokens_of(user) >= limit:
        raise TooManyTokens(limit)
    key = _new_key()
    token = ApiToken.objects.create(
        name=name[:100],
        user=user,
        prefix=key[:KEY_PREFIX_LENGTH],
        key_hash=hash_key(key),
        expires_at=capped_expiry(expires_at, parent),
    )
    audit_record(
        actor=actor or Actor(user=user), action="token.issue", obj=token, after=token_snapshot(token)
    )
    return token, key


@transaction.atomic
def token_revoke(
    token: ApiToken,
    *,
    actor: Actor | None = None,
) -> ApiToken:
    """Revoke a token (idempotent): it stops authenticating at once; the row stays for the audit trail.

    ``actor``: who asks; the token's owner when not given.
    """
    before = token_snapshot(token)
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    audit_record(
        actor=actor or Actor(user=token.user),
        action="token.revoke",
        obj=token,
        before=before,
        after=token_snapshot(token),
    )
    return token


def token_snapshot(token: ApiToken) -> dict[str, object]:
    """What the audit trail keeps about a token (never the key or its hash)."""
    return {
        "name": token.name,
        "user": token.user.get_username(),
        "prefix": token.prefix,
        "expires_at": token.expires_at.isoformat() if token.expires_at else None,
        "revoked_at": token.revoked_at.isoformat() if token.revoked_at else None,
    }

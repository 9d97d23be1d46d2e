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


class TokenParentRevoked(ApplicationError):
    """The token asking to mint a child was revoked meanwhile: a revoked token mints nothing."""

    def __init__(self, parent: ApiToken) -> None:
        self.parent = parent
        super().__init__(
            f"The token {parent.name!r} ({parent.prefix}…) was revoked, so it cannot create tokens; "
            "sign in again or use an active token."
        )


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
    if parent is not None:
        # The parent's row is the lock ``token_revoke`` takes too: a child is either minted before
        # the revocation (and revoked with it) or refused.
        parent = ApiToken.objects.select_for_update().get(pk=parent.pk)
        if parent.revoked_at is not None:
            raise TokenParentRevoked(parent)
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
        parent=parent,
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
    """Revoke a token and every token minted with it, down the tree (idempotent).

    They stop authenticating at once; the rows stay for the audit trail, one entry per token.
    """
    # Lock first: ``token_issue`` locks the parent too, so no child is minted while this runs.
    ApiToken.objects.select_for_update().filter(pk=token.pk).first()
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
    token_revoke_descendants(token, actor=actor)
    return token


def token_revoke_descendants(token: ApiToken, *, actor: Actor | None = None) -> int:
    """Revoke the active tokens minted with revoked ``token``, down the tree; how many there were."""
    descendants = token_descendants_active(token)
    for child in descendants:
        child_before = token_snapshot(child)
        child.revoked_at = token.revoked_at or timezone.now()
        child.save(update_fields=["revoked_at"])
        audit_record(
            actor=actor or Actor(user=token.user),
            action="token.revoke",
            obj=child,
            before=child_before,
            after={**token_snapshot(child), "revoked_with": token.prefix},
        )
    return len(descendants)


def token_descendants_active(token: ApiToken) -> list[ApiToken]:
    """The not-yet-revoked tokens minted with ``token``, its children's, and so on (breadth first)."""
    found: list[ApiToken] = []
    level = [token.pk]
    seen = {token.pk}
    while level:
        children = list(
            ApiToken.objects.select_for_update()
            .select_related("user")
            .filter(parent_id__in=level)
            .exclude(pk__in=seen)
        )
        seen.update(child.pk for child in children)
        found.extend(child for child in children if child.revoked_at is None)
        level = [child.pk for child in children]
    return found


def token_snapshot(token: ApiToken) -> dict[str, object]:
    """What the audit trail keeps about a token (never the key or its hash)."""
    return {
        "name": token.name,
        "user": token.user.get_username(),
        "prefix": token.prefix,
        "expires_at": token.expires_at.isoformat() if token.expires_at else None,
        "revoked_at": token.revoked_at.isoformat() if token.revoked_at else None,
    }

"""Who is acting, as the services and the audit trail need it, from an API request."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser, User
from rest_framework.exceptions import NotAuthenticated
from rest_framework.request import Request

from apps.accounts.authentication import token_name_of
from apps.core.middleware import request_id_of


@dataclass(frozen=True)
class Actor:
    """Who is making a change, as the audit trail records it."""

    user: User | AnonymousUser | None = None
    name: str = ""  # e.g. "system:adoption" when there is no user
    token_name: str = ""
    request_id: str = ""


def actor_for(request: Request) -> Actor:
    """The user, the token name (if a token was used) and the request id of ``request``."""
    return Actor(user=request.user, token_name=token_name_of(request), request_id=request_id_of(request))


def signed_in_user(request: Request) -> User:
    """``request.user`` where the view requires sign-in: a ``User``, never the anonymous one."""
    user = request.user
    if not isinstance(user, User):  # IsAuthenticated refused it already; this keeps the type honest
        raise NotAuthenticated()
    return user

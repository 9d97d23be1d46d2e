"""The ``Actor`` of an API request: its user, the token used, and the request id."""

from __future__ import annotations

from django.contrib.auth.models import User
from rest_framework.exceptions import NotAuthenticated
from rest_framework.request import Request

from apps.accounts.authentication import token_name_of
from apps.audit.actors import Actor
from apps.core.middleware import request_id_of


def actor_for(request: Request) -> Actor:
    """The user, the token name (if a token was used) and the request id of ``request``."""
    return Actor(user=request.user, token_name=token_name_of(request), request_id=request_id_of(request))


def signed_in_user(request: Request) -> User:
    """``request.user`` where the view requires sign-in: a ``User``, never the anonymous one."""
    user = request.user
    if not isinstance(user, User):  # IsAuthenticated refused it already; this keeps the type honest
        raise NotAuthenticated()
    return user

"""The authentication backend: ``mozilla-django-oidc``'s code flow, hardened and mapped to our users."""

from __future__ import annotations

import logging
from typing import Any

import requests
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.http import HttpRequest
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings

from apps.accounts.oidc.provider import ENDPOINTS, endpoint
from apps.accounts.oidc.signin import BadClaims, oidc_sign_in
from apps.core.middleware import request_id_of

log = logging.getLogger(__name__)


def oidc_setting(attr: str, *default: Any) -> Any:
    """A setting as ``mozilla-django-oidc`` reads it, with the endpoints from discovery when not set."""
    if attr in ENDPOINTS:
        value = endpoint(attr)
        if value:
            return value
        if default:
            return default[0]
        raise ImproperlyConfigured(f"{attr} is not set and OIDC_OP_DISCOVERY_URL does not provide it")
    return import_from_settings(attr, *default)


def check_id_token(payload: dict[str, Any], *, client_id: str, issuer: str) -> None:
    """OpenID Connect Core §3.1.3.7: the ID token is for us (aud, azp) from our provider (iss).

    ``mozilla-django-oidc`` checks the signature, expiry and nonce but not these two, so a token the
    provider issued to another client of it would otherwise sign in here.
    """
    audience = payload.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    if client_id not in audiences:
        raise SuspiciousOperation("The ID token was issued for another client (aud).")
    if len(audiences) > 1 and payload.get("azp") != client_id:
        raise SuspiciousOperation("The ID token names several audiences but not us as its azp.")
    if issuer and payload.get("iss") != issuer:
        raise SuspiciousOperation("The ID token comes from another issuer (iss).")
    if "exp" not in payload:
        raise SuspiciousOperation("The ID token has no expiry (exp).")


class OidcBackend(OIDCAuthenticationBackend):
    """Always listed in ``AUTHENTICATION_BACKENDS``; does nothing unless ``OIDC_ENABLED``.

    Settings are read when a sign-in starts, not when Django instantiates the backend (it does so
    for every request's ``get_user``), so a provider outage never breaks pages for signed-in users.
    """

    get_settings = staticmethod(oidc_setting)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from django.contrib.auth import get_user_model

        self.UserModel = get_user_model()

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> User | None:
        if not settings.OIDC_ENABLED or request is None or "username" in kwargs or "password" in kwargs:
            return None  # a local (break-glass) sign-in never waits on, or fails with, the provider
        if not (request.GET.get("code") and request.GET.get("state")):
            return None
        try:
            super().__init__()  # reads the endpoints (discovery, once per process) now
            user: User | None = super().authenticate(request, **kwargs)
        except requests.RequestException as exc:
            log.warning("OIDC sign-in failed: the provider did not answer (%s)", type(exc).__name__)
            return None
        return user

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        payload: dict[str, Any] = super().verify_token(token, **kwargs)
        check_id_token(payload, client_id=self.OIDC_RP_CLIENT_ID, issuer=endpoint("OIDC_OP_ISSUER"))
        return payload

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> User | None:
        claims = self.get_userinfo(access_token, id_token, payload)
        if not isinstance(claims, dict) or claims.get("sub") != payload.get("sub"):
            # OpenID Connect Core §5.3.2: userinfo about someone else must not be used.
            raise SuspiciousOperation("The userinfo response is about another subject than the ID token.")
        # The groups may be in the ID token, the userinfo response, or both: userinfo wins.
        merged = {**payload, **claims}
        try:
            return oidc_sign_in(
                issuer=str(payload.get("iss") or ""), claims=merged, request_id=request_id_of(self.request)
            )
        except BadClaims as exc:
            raise SuspiciousOperation(str(exc)) from None

    def get_user(self, user_id: Any) -> User | None:
        if not settings.OIDC_ENABLED:
            return None  # sign-in through the provider turned off: its sessions end too
        user: User | None = super().get_user(user_id)
        return user

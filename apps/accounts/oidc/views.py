"""``/oidc/authenticate/`` (start) and ``/oidc/callback/`` (the provider sends the browser back).

Both answer 404 unless ``OIDC_ENABLED``. The flow carries a state, a nonce and a PKCE verifier in
the session (``mozilla-django-oidc``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import requests
from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from apps.accounts.oidc.backend import oidc_setting

log = logging.getLogger(__name__)


class OidcStartView(OIDCAuthenticationRequestView):
    get_settings = staticmethod(oidc_setting)


class OidcCallbackView(OIDCAuthenticationCallbackView):
    get_settings = staticmethod(oidc_setting)


def when_enabled(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The view when OIDC is configured; a 404 otherwise (before the view reads its settings)."""

    def gated(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404("Sign-in with an identity provider is not configured.")
        try:
            return view(request, *args, **kwargs)
        except requests.RequestException as exc:  # the provider (its discovery document) is down
            log.warning("OIDC sign-in could not start: the provider did not answer (%s)", type(exc).__name__)
            return HttpResponseRedirect(settings.LOGIN_REDIRECT_URL_FAILURE)

    return gated

"""``/oidc/authenticate/`` (start) and ``/oidc/callback/`` (the provider sends the browser back).

Both answer 404 unless ``OIDC_ENABLED``. The flow carries a state, a nonce and a PKCE verifier in
the session (``mozilla-django-oidc``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from apps.accounts.oidc.backend import oidc_setting


class OidcStartView(OIDCAuthenticationRequestView):
    get_settings = staticmethod(oidc_setting)


class OidcCallbackView(OIDCAuthenticationCallbackView):
    get_settings = staticmethod(oidc_setting)


def when_enabled(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The view when OIDC is configured; a 404 otherwise (before the view reads its settings)."""

    def gated(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404("Sign-in with an identity provider is not configured.")
        return view(request, *args, **kwargs)

    return gated

"""Routes of the OIDC sign-in, under /oidc/. The names are the ones ``mozilla-django-oidc`` reverses."""

from __future__ import annotations

from django.urls import path

from apps.accounts.oidc.views import OidcCallbackView, OidcStartView, when_enabled

urlpatterns = [
    path("authenticate/", when_enabled(OidcStartView.as_view()), name="oidc_authentication_init"),
    path("callback/", when_enabled(OidcCallbackView.as_view()), name="oidc_authentication_callback"),
]

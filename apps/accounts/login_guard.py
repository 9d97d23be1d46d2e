"""Sign-in throttling (issue #16): django-axes counts failed sign-ins per user and per address.

Only network sign-ins count: ``/login/`` and ``/admin/login/`` both call ``authenticate(request,
...)``. A call without a request (a script, the test client's ``login``) is not a network attempt
and passes through, where plain django-axes would refuse it.
"""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from django.http import HttpRequest
from rest_framework.settings import api_settings


class LoginGuardBackend(AxesStandaloneBackend):
    """First in ``AUTHENTICATION_BACKENDS``: refuses a locked-out user or address before any check."""

    def authenticate(self, request: HttpRequest | None, *args: Any, **kwargs: Any) -> Any:
        if request is None:
            return None
        return super().authenticate(request, *args, **kwargs)


def client_ip(request: HttpRequest) -> str:
    """The address that sent the sign-in: ``REMOTE_ADDR``, or, behind ``API_NUM_PROXIES`` trusted
    proxies, the address the outermost trusted proxy saw (never a client-supplied header alone)."""
    proxies = api_settings.NUM_PROXIES or 0  # REST_FRAMEWORK["NUM_PROXIES"], from API_NUM_PROXIES
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies and forwarded:
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if len(hops) >= proxies:
            return hops[-proxies]
    return str(request.META.get("REMOTE_ADDR", ""))

"""The provider's endpoints: from settings, else from its discovery document (fetched once per
process, on first use, never at import: a provider outage must not stop the control plane starting)."""

from __future__ import annotations

import threading
from typing import Any

import requests
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# Our setting -> the discovery document's field (OpenID Connect Discovery 1.0 §3).
ENDPOINTS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
    "OIDC_OP_ISSUER": "issuer",
    "OIDC_OP_LOGOUT_ENDPOINT": "end_session_endpoint",
}

_lock = threading.Lock()
_discovered: dict[str, dict[str, Any]] = {}


def discovery(url: str) -> dict[str, Any]:
    with _lock:
        if url not in _discovered:
            response = requests.get(url, timeout=settings.OIDC_TIMEOUT, verify=settings.OIDC_VERIFY_SSL)
            response.raise_for_status()
            document = response.json()
            if not isinstance(document, dict):
                raise ImproperlyConfigured(f"OIDC_OP_DISCOVERY_URL={url!r} did not return a JSON object")
            _discovered[url] = document
        return _discovered[url]


def forget_discovery() -> None:
    """Tests, and a provider that moved its endpoints: the next sign-in reads the document again."""
    with _lock:
        _discovered.clear()


def endpoint(name: str) -> str:
    """``OIDC_OP_*`` from settings when set, else from the discovery document; "" when neither."""
    value = str(getattr(settings, name, "") or "")
    if value or name not in ENDPOINTS or not settings.OIDC_OP_DISCOVERY_URL:
        return value
    return str(discovery(settings.OIDC_OP_DISCOVERY_URL).get(ENDPOINTS[name]) or "")

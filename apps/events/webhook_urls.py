"""Where webhooks may point (issue #16): http/https only, public addresses only, no redirects.

A webhook URL is entered by an administrator, but the control plane sends it requests from inside
the cluster network: to loopback, link-local (cloud metadata at 169.254.169.254), private or other
special addresses that would make it a way to reach services that are not meant to be reachable.
Those are refused unless ``WEBHOOK_ALLOW_PRIVATE_TARGETS`` is true (an in-house receiver on a
private network). The check runs when the URL is saved and again before every send, on every
address the name resolves to then (so a name later pointed elsewhere is caught; a resolver that
changes its answer between our check and the connection a moment later is not). Redirects are not
followed: a 3xx is a failed delivery that says so.

A saved URL may not carry credentials either (``user:password@host``): they would be shown in the
admin and the API, and sent with every message; the receiver authenticates us by the signature.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

SCHEMES = ("http", "https")


def allow_private() -> bool:
    return settings.WEBHOOK_ALLOW_PRIVATE_TARGETS


def _special(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for kind in ("loopback", "link_local", "private", "multicast", "reserved", "unspecified"):
        if getattr(address, f"is_{kind}"):
            return kind.replace("_", "-")
    if not address.is_global:
        return "non-public"
    return None


def _addresses(host: str, port: int) -> list[str]:
    try:
        return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)})
    except (OSError, UnicodeError):
        return []


def webhook_url_problem(url: str, *, allow_private: bool) -> str | None:
    """Why ``url`` may not be a webhook target, or None when it may."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        return f"not a valid URL ({exc})"
    if parts.scheme not in SCHEMES:
        return f"the scheme must be http or https, not {parts.scheme or 'empty'!r}"
    host = parts.hostname
    if not host:
        return "the URL has no host"
    if allow_private:
        return None
    addresses = _addresses(host, port)
    if not addresses:
        return f"the host {host!r} does not resolve"
    for text in addresses:
        kind = _special(ipaddress.ip_address(text.split("%", 1)[0]))
        if kind:
            return (
                f"{host!r} resolves to {text}, a {kind} address; webhooks may only reach public "
                "addresses (set WEBHOOK_ALLOW_PRIVATE_TARGETS=true for a receiver on a private network)"
            )
    return None


def webhook_url_save_problem(url: str) -> str | None:
    """Why ``url`` may not be saved as a webhook target (the admin and the API), or None when it may:
    ``webhook_url_problem``, and no credentials in it."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        return f"not a valid URL ({exc})"
    if parts.username is not None or parts.password is not None:
        return (
            "the URL carries credentials (user:password@); the receiver checks the X-Signature header instead"
        )
    return webhook_url_problem(url, allow_private=allow_private())


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Turn every redirect into the HTTPError of the 3xx itself."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


# No proxies from the environment either: the address checked is the address connected to.
OPENER = urllib.request.build_opener(_NoRedirects(), urllib.request.ProxyHandler({}))

"""``Content-Security-Policy`` on every response (issue #16).

Scripts and styles come from this server only (Swagger UI's assets are served locally too, and its
start-up script is a file: ``SpectacularSwaggerSplitView``). The one inline script, the theme
pre-paint snippet in ``web/base.html``, is allowed by the SHA-256 of its exact text, computed here
from the template at start-up, so editing it cannot silently break the page. Inline ``style=``
attributes stay allowed ('unsafe-inline' for styles only): they cannot run code.
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from pathlib import Path

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from apps.core.middleware_base import SyncAsyncMiddleware

HEADER = "Content-Security-Policy"
_OPEN, _CLOSE = "<script>", "</script>"


def inline_scripts(text: str) -> list[str]:
    """The bodies of the ``<script>...</script>`` blocks (no attributes) in ``text``, in order.

    A plain scan instead of a lazy regex: each block is found once, and an opener with no closer ends
    the scan (no later closer exists either), so the cost is linear in ``text``.
    """
    bodies: list[str] = []
    start = text.find(_OPEN)
    while start >= 0:
        body_start = start + len(_OPEN)
        end = text.find(_CLOSE, body_start)
        if end < 0:
            break
        bodies.append(text[body_start:end])
        start = text.find(_OPEN, end + len(_CLOSE))
    return bodies


def inline_script_hashes(template: Path) -> list[str]:
    """``'sha256-…'`` sources for each inline ``<script>`` of ``template`` (none if it is missing)."""
    try:
        text = template.read_text(encoding="utf-8")
    except OSError:
        return []
    return [
        f"'sha256-{base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()}'"
        for body in inline_scripts(text)
    ]


@cache
def policy() -> str:
    base_template = Path(settings.BASE_DIR) / "frontend" / "templates" / "web" / "base.html"
    scripts = " ".join(["'self'", *inline_script_hashes(base_template)])
    directives = {
        "default-src": "'self'",
        "script-src": scripts,
        "style-src": "'self' 'unsafe-inline'",
        "img-src": "'self' data:",
        "font-src": "'self'",
        # 'self' covers same-origin ws:/wss: in current browsers (the live view's /ws/events/).
        "connect-src": "'self'",
        "object-src": "'none'",
        "base-uri": "'none'",
        "form-action": "'self'",
        "frame-ancestors": "'none'",
    }
    extra = settings.CONTENT_SECURITY_POLICY_EXTRA.strip()
    text = "; ".join(f"{name} {value}" for name, value in directives.items())
    return f"{text}; {extra}" if extra else text


class ContentSecurityPolicyMiddleware(SyncAsyncMiddleware):
    """Adds the policy unless a view set its own."""

    def finish(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if HEADER not in response:
            response[HEADER] = policy()
        return response

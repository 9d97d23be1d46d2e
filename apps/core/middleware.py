"""Request ids: ours for every request, echoed and put into log records and audit entries.

A client's ``X-Request-ID`` is taken only from a trusted proxy (``REQUEST_ID_TRUSTED_PROXIES``, the
addresses of the proxies in front, e.g. an ingress that sets its own ids): anyone else could
otherwise write any id into the audit trail, or reuse another request's (issue #16).
"""

from __future__ import annotations

import contextvars
import logging
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from apps.core.middleware_base import SyncAsyncMiddleware

HEADER = "X-Request-ID"
META_KEY = "HTTP_X_REQUEST_ID"
# Letters, digits and a few separators, bounded: the id ends up in logs and the audit table (64 chars).
_SANE = re.compile(r"^[A-Za-z0-9._:\-]{1,64}$")

_current: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


def current_request_id() -> str:
    """The id of the request being served in this context ("-" outside a request)."""
    return _current.get()


def bind_request_id(request_id: str) -> contextvars.Token[str]:
    """Make ``request_id`` current in this context (a Celery task carrying one); undo with ``unbind``."""
    return _current.set(request_id)


def unbind_request_id(token: contextvars.Token[str]) -> None:
    _current.reset(token)


def request_id_of(request: Any) -> str:
    """The request id stored on a Django or DRF request ("" when the middleware did not run)."""
    return str(
        getattr(request, "request_id", "") or getattr(getattr(request, "_request", None), "request_id", "")
    )


def _pick(request: HttpRequest) -> str:
    incoming = request.META.get(META_KEY)
    if incoming and _SANE.match(incoming):
        trusted = settings.REQUEST_ID_TRUSTED_PROXIES
        if trusted and request.META.get("REMOTE_ADDR") in trusted:
            return incoming
    return uuid.uuid4().hex


class RequestIdMiddleware(SyncAsyncMiddleware):
    """Gives each request its id for the length of the request, and echoes it in the response."""

    @contextmanager
    def around(self, request: HttpRequest) -> Iterator[None]:
        request_id = _pick(request)
        request.request_id = request_id  # type: ignore[attr-defined]  # ours; read by request_id_of
        token = _current.set(request_id)
        try:
            yield
        finally:
            _current.reset(token)

    def finish(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        response[HEADER] = request_id_of(request)
        return response


class RequestIdLogFilter(logging.Filter):
    """Adds ``record.request_id`` so formatters can print ``%(request_id)s``."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            # django.request logs its 4xx/5xx lines after the middleware returned, but passes the request.
            from_request = getattr(getattr(record, "request", None), "request_id", None)
            record.request_id = from_request or current_request_id()
        return True

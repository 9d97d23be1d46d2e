"""One request-body limit for every endpoint, answered with a 413 before anything reads the body.

DRF parses ``request.stream`` itself, so Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (checked only by
``request.body`` and form parsing) never limited an API body. Two layers enforce
``REQUEST_BODY_MAX_BYTES`` instead:

- ``BodyLimitMiddleware`` (Django): a declared ``Content-Length`` above the limit is refused before
  the view, authentication included; below it, the WSGI input stream already stops at the declared
  length, so a client that sends more than it declares is never read past it.
- ``AsgiBodyLimit`` (ASGI, around the HTTP application): a body sent without a length
  (``Transfer-Encoding: chunked``) is counted as it arrives and cut off at the limit; Django's own
  ASGI handler would otherwise spool it to disk whatever its size, and the WSGI handler would
  silently read it as empty.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from apps.core.api_errors import too_large_body
from apps.core.numbers import ascii_int

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _declared_length(value: str | bytes | None) -> int | None:
    """The Content-Length as a number, or None when absent or not a plain ASCII number."""
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip()
    return ascii_int(text)


class BodyLimitMiddleware:
    """Refuse a request whose declared body is over the limit, before any view or parser reads it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        declared = _declared_length(request.META.get("CONTENT_LENGTH"))
        if declared is not None and declared > settings.REQUEST_BODY_MAX_BYTES:
            return JsonResponse(too_large_body(), status=413)
        return self.get_response(request)


class AsgiBodyLimit:
    """ASGI middleware for ``http`` scopes: a 413 for a body over the limit, however it is sent.

    A declared length is checked up front (and the WSGI layer reads no further than it). A body
    without one (chunked) is read here up to the limit and handed on with its length declared, so
    Django sees it at all (a WSGI request without Content-Length has an empty body) and at most the
    limit is ever buffered.
    """

    def __init__(self, app: AsgiApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = settings.REQUEST_BODY_MAX_BYTES
        headers = list(scope.get("headers") or [])
        declared = _declared_length(dict(headers).get(b"content-length"))
        if declared is not None and declared > limit:
            await _send_too_large(send)
            return
        if declared is not None or not any(name == b"transfer-encoding" for name, _ in headers):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before the body was complete
            chunk = bytes(message.get("body", b""))
            size += len(chunk)
            if size > limit:
                await _send_too_large(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        kept = [(name, value) for name, value in headers if name != b"transfer-encoding"]
        scope = {**scope, "headers": [*kept, (b"content-length", str(len(body)).encode())]}
        await self.app(scope, replay, send)


async def _send_too_large(send: Send) -> None:
    body = json.dumps(too_large_body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})

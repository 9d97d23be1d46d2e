"""One base for our middleware: the same code path under WSGI and ASGI, without a thread hop."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse


class SyncAsyncMiddleware:
    """Runs ``around`` while the view runs and ``finish`` on its response, sync or async alike.

    Django adapts a sync-only middleware under ASGI by moving it to a thread; declaring both modes
    and picking one at start-up keeps every request on the event loop.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        # Decided once: Django builds the chain once, and a flag keeps ``self`` typed as itself.
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        if self.is_async:
            return self.__acall__(request)
        with self.around(request):
            response: HttpResponse = self.get_response(request)
        return self.finish(request, response)

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        with self.around(request):
            response: HttpResponse = await self.get_response(request)
        return self.finish(request, response)

    def around(self, request: HttpRequest) -> AbstractContextManager[object]:
        """What holds while the rest of the chain handles ``request`` (nothing by default)."""
        return nullcontext()

    def finish(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        """The response on its way out (unchanged by default)."""
        return response

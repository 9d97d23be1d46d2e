"""Answers the kubelet's probes before Django validates the Host header.

The kubelet sends ``Host: <pod IP>:<port>`` (kubernetes pkg/probe/http/request.go builds the URL from
the pod IP unless the probe names a host), and no ``ALLOWED_HOSTS`` lists pod IPs, so behind
``CommonMiddleware`` every probe would be a 400. This middleware sits before it (and before
``SecurityMiddleware``, whose HTTPS redirect the kubelet would follow to a port without TLS) and answers
only the probe paths, only for GET and HEAD; everything else goes down the chain unchanged. The answers
carry nothing ``ALLOWED_HOSTS`` protects: no links, no absolute URLs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse

from apps.core.middleware_base import SyncAsyncMiddleware
from apps.core.views import livez, readyz

ProbeView = Callable[[HttpRequest], HttpResponse]

PROBE_VIEWS: dict[str, ProbeView] = {"/livez": livez, "/readyz": readyz, "/healthz": readyz}


def probe_view(request: HttpRequest) -> ProbeView | None:
    if request.method not in ("GET", "HEAD"):
        return None
    return PROBE_VIEWS.get(request.path_info)


class ProbeMiddleware(SyncAsyncMiddleware):
    def __call__(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        view = probe_view(request)
        if view is None:
            return super().__call__(request)
        if self.is_async:
            # The readiness checks open a database connection: off the event loop, like any sync view.
            return sync_to_async(view, thread_sensitive=True)(request)
        return view(request)

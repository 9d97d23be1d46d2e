"""ASGI entry point: Django for HTTP, Channels for websockets (``/ws/...``)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.base")
django_asgi_app = get_asgi_application()  # must run before importing anything that touches models

from a2wsgi import WSGIMiddleware  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402

from apps.core.body_limit import AsgiBodyLimit  # noqa: E402
from apps.core.websocket import SameOriginOrTokenValidator, websocket_auth_stack  # noqa: E402
from controlplane.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # Django's WSGIHandler returns an HttpResponse, an iterable of bytes; its stub says HttpResponseBase.
        # Bodies over REQUEST_BODY_MAX_BYTES are refused here, chunked ones included.
        "http": AsgiBodyLimit(
            WSGIMiddleware(get_wsgi_application(), workers=settings.HTTP_THREADS)  # type: ignore[arg-type]
            if settings.HTTP_THREADS
            else django_asgi_app
        ),
        # Same-origin browsers, or programs with a token: a foreign Origin is refused before the
        # consumer runs.
        # path() to a consumer's as_asgi(): the stub of URLRouter asks for a private URLPattern subtype.
        "websocket": SameOriginOrTokenValidator(
            websocket_auth_stack(URLRouter(websocket_urlpatterns))  # type: ignore[arg-type]
        ),
    }
)

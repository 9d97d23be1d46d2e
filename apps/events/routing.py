"""Websocket routes of the events app: ``/ws/events/`` with token authentication on top of the session."""

from __future__ import annotations

from django.urls import path

from apps.events.auth import TokenAuthMiddleware
from apps.events.consumers import EventsConsumer

websocket_urlpatterns = [
    path("ws/events/", TokenAuthMiddleware(EventsConsumer.as_asgi())),
]

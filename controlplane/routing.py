"""Websocket URL routes, gathered from the apps that serve them."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver

from apps.events.routing import websocket_urlpatterns as events_websocket_urlpatterns

websocket_urlpatterns: list[URLPattern | URLResolver] = [*events_websocket_urlpatterns]

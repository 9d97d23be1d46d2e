"""Non-API URLs of the events app, included at ``/metrics`` by ``controlplane/urls.py``."""

from __future__ import annotations

from django.urls import path

from apps.events.metrics import metrics_view

urlpatterns = [path("", metrics_view, name="metrics")]

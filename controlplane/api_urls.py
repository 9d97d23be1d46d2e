"""The REST API under /api/v1/: one router for resources plus explicit paths for verbs."""

from __future__ import annotations

from django.urls import path

from apps.core.api import ApiRoot

app_name = "api"

urlpatterns = [
    path("", ApiRoot.as_view(), name="root"),
]

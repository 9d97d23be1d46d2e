"""The REST API under /api/v1/: one router per app for resources, explicit paths for verbs.

Anything else under /api/v1/ answers a JSON 404 in the API's error format (not Django's HTML page).
"""

from __future__ import annotations

from django.conf import settings
from django.urls import include, path, re_path
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api import ApiRoot

app_name = "api"


@extend_schema(
    tags=["meta"],
    summary="What this server offers",
    responses=inline_serializer(
        "ApiRoot",
        {
            "name": serializers.CharField(),
            "api_version": serializers.CharField(),
            "mindcluster_releases": serializers.ListField(child=serializers.CharField()),
            "strategies": serializers.ListField(child=serializers.CharField()),
            "links": serializers.DictField(child=serializers.CharField()),
        },
    ),
)
class DocumentedApiRoot(ApiRoot):
    """``ApiRoot`` with its response described for the OpenAPI schema."""


class UnknownPathApi(APIView):
    """Catch-all: a JSON 404 that hints at the missing trailing slash, the usual cause."""

    permission_classes = [AllowAny]
    schema = None  # not part of the contract

    def _not_found(self, request: Request, *args: object, **kwargs: object) -> Response:
        hint = " (every path ends with '/')" if not request.path.endswith("/") else ""
        raise NotFound(f"No API endpoint at {request.path}{hint}.")

    get = post = put = patch = delete = head = options = _not_found


class BenchConstantApi(APIView):
    """A bare DRF view returning a constant: the baseline bench/bench_api.py compares endpoints against."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_classes: list[type] = []
    schema = None

    def get(self, request: Request) -> Response:
        return Response({"ok": True})


urlpatterns = [
    path("", DocumentedApiRoot.as_view(), name="root"),
    path("", include("apps.api.jobs.urls")),
    path("", include("apps.api.policies.urls")),
    path("", include("apps.api.events.urls")),
    path("", include("apps.api.audit.urls")),
    path("", include("apps.api.accounts.urls")),
    path("", include("apps.api.decisions.urls")),
    path("", include("apps.api.admission.urls")),
    path("", include("apps.api.advice")),
    path("", include("apps.api.fleet")),
    path("", include("apps.api.webhooks.urls")),
]
if settings.BENCH_ENDPOINTS:
    urlpatterns.append(path("_bench/constant/", BenchConstantApi.as_view(), name="bench-constant"))
# Last: anything else under /api/v1/ (including paths with newlines) is a JSON 404.
urlpatterns.append(re_path(r"^[\s\S]*$", UnknownPathApi.as_view(), name="unknown"))

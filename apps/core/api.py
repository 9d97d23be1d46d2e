"""API root: what this server offers and which version it is."""

from __future__ import annotations

from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from mindcluster.releases import RELEASES
from mindcluster.strategies import STRATEGIES


class ApiRoot(APIView):
    """Entry point of /api/v1/: links and the MindCluster facts the server knows about."""

    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        return Response(
            {
                "name": "MindCluster recovery-policy control plane",
                "api_version": "v1",
                "mindcluster_releases": list(RELEASES),
                "strategies": list(STRATEGIES),
                "links": {
                    "health": request.build_absolute_uri("/healthz"),
                    "admin": request.build_absolute_uri("/admin/"),
                },
            }
        )

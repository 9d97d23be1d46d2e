"""Who may read the API's own description (``/api/schema/``, ``/api/docs/``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

if TYPE_CHECKING:
    from rest_framework.views import APIView


class ApiDocsAccess(BasePermission):
    """Signed-in users (session or token); everyone when ``API_DOCS_PUBLIC`` is true."""

    message = (
        "The API documentation is for signed-in users: sign in or send 'Authorization: Token <key>' "
        "(or set API_DOCS_PUBLIC=true on the server)."
    )

    def has_permission(self, request: Request, view: APIView) -> bool:
        if settings.API_DOCS_PUBLIC:
            return True
        return bool(request.user and request.user.is_authenticated)

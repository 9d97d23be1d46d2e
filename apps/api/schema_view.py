"""``/api/schema/``: the OpenAPI document, generated once per process instead of on every request.

Generating it walks every view and serializer (about 0.2 s of CPU): served per request, the schema
was the cheapest way to keep a web process busy. It depends only on the code (``SERVE_PUBLIC``: the
same document for every reader), so one copy per API version is kept for the process's life; a
deploy restarts the process. Permission checks still run on every request.
"""

from __future__ import annotations

import threading
from typing import Any

from drf_spectacular.views import SpectacularAPIView
from rest_framework.request import Request
from rest_framework.response import Response

_schemas: dict[str | None, Any] = {}
_lock = threading.Lock()


class CachedSpectacularAPIView(SpectacularAPIView):
    def _get_schema_response(self, request: Request) -> Response:
        version = self.api_version or request.version or self._get_version_parameter(request)
        with _lock:  # one generation even when the first requests arrive together
            if version not in _schemas:
                generator = self.generator_class(
                    urlconf=self.urlconf, api_version=version, patterns=self.patterns
                )
                _schemas[version] = generator.get_schema(request=request, public=self.serve_public)
        return Response(
            data=_schemas[version],
            headers={"Content-Disposition": f'inline; filename="{self._get_filename(request, version)}"'},
        )

"""Top-level URLs: admin, health, the REST API under /api/v1/, and the dashboard.

No admission webhook here: it is in ``controlplane.admission_urls``, the URLconf of a process started
with ``ADMISSION_WEBHOOK=true`` only.
"""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerSplitView

from apps.api.metrics import metrics_view
from apps.api.schema_view import CachedSpectacularAPIView
from apps.core.permissions import ApiDocsAccess
from apps.core.views import healthz, livez, readyz

urlpatterns = [
    path("livez", livez, name="livez"),
    path("readyz", readyz, name="readyz"),
    path("healthz", healthz, name="healthz"),  # the old name of readyz
    path("admin/", admin.site.urls),
    path("api/v1/", include("controlplane.api_urls")),
    path("oidc/", include("apps.accounts.oidc.urls")),  # 404 unless OIDC_ENABLED
    path(
        "api/schema/", CachedSpectacularAPIView.as_view(permission_classes=[ApiDocsAccess]), name="api-schema"
    ),
    # The split view serves Swagger UI's start-up script as a file: no inline script, so the
    # Content-Security-Policy needs no exception for it.
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="api-schema", permission_classes=[ApiDocsAccess]),
        name="api-docs",
    ),
    path("metrics", metrics_view, name="metrics"),
    path("", include("apps.web.urls")),
]

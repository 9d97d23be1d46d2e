"""Routes of the policies API: verbs on a job's policy, stateless tools, and the presets resource."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from apps.api.policies.preset_views import NamespacePresetApi, PresetViewSet
from apps.api.policies.tool_views import PolicyValidateApi, RenderApi
from apps.api.policies.views import (
    PolicyApplyApi,
    PolicyDetailApi,
    PolicyPreviewApi,
    RevisionListApi,
    RevisionRestoreApi,
    SyncDetailApi,
)

router = SimpleRouter()
router.register("presets", PresetViewSet, basename="preset")

urlpatterns = [
    path("jobs/<int:job_id>/policy/", PolicyDetailApi.as_view(), name="job-policy"),
    path("jobs/<int:job_id>/policy/preview/", PolicyPreviewApi.as_view(), name="job-policy-preview"),
    path("jobs/<int:job_id>/policy/apply/", PolicyApplyApi.as_view(), name="job-policy-apply"),
    path("jobs/<int:job_id>/policy/revisions/", RevisionListApi.as_view(), name="job-policy-revisions"),
    path(
        "jobs/<int:job_id>/policy/revisions/<int:number>/restore/",
        RevisionRestoreApi.as_view(),
        name="job-policy-revision-restore",
    ),
    path("jobs/<int:job_id>/sync/", SyncDetailApi.as_view(), name="job-sync"),
    path("policies/validate/", PolicyValidateApi.as_view(), name="policy-validate"),
    path("render/", RenderApi.as_view(), name="render"),
    path(
        "clusters/<str:cluster>/namespaces/<str:namespace>/presets/<slug:name>/",
        NamespacePresetApi.as_view(),
        name="namespace-preset",
    ),
    *router.urls,
]

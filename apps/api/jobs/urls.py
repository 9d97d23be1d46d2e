"""Routes of the jobs API: a router for the job resource, a plain path for clusters."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from apps.api.jobs.views import ClusterListApi, JobViewSet

router = SimpleRouter()
router.register("jobs", JobViewSet, basename="job")

urlpatterns = [
    path("clusters/", ClusterListApi.as_view(), name="cluster-list"),
    *router.urls,
]

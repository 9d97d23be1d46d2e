"""Routes: namespace defaults under a cluster, and the recreate verb on a job."""

from __future__ import annotations

from django.urls import path

from apps.api.admission.views import (
    DefaultPolicyApi,
    DefaultPolicyRevisionsApi,
    JobRecreateApi,
    JobRecreateStatusApi,
)

urlpatterns = [
    path(
        "clusters/<str:cluster>/namespaces/<str:namespace>/default-policy/",
        DefaultPolicyApi.as_view(),
        name="namespace-default-policy",
    ),
    path(
        "clusters/<str:cluster>/namespaces/<str:namespace>/default-policy/revisions/",
        DefaultPolicyRevisionsApi.as_view(),
        name="namespace-default-policy-revisions",
    ),
    path("jobs/<int:job_id>/recreate/", JobRecreateApi.as_view(), name="job-recreate"),
    path(
        "jobs/<int:job_id>/recreates/<int:operation_id>/",
        JobRecreateStatusApi.as_view(),
        name="job-recreate-status",
    ),
]

from __future__ import annotations

from django.urls import path

from apps.api.events.incidents import incidents_urlpatterns
from apps.api.events.views import EventListApi, JobEventListApi

urlpatterns = [
    path("jobs/<int:job_id>/events/", JobEventListApi.as_view(), name="job-events"),
    path("events/", EventListApi.as_view(), name="events"),
    *incidents_urlpatterns,
]

from __future__ import annotations

from django.urls import path

from apps.events.api.views import EventListApi, JobEventListApi
from apps.events.incidents_api import incidents_urlpatterns

urlpatterns = [
    path("jobs/<int:job_id>/events/", JobEventListApi.as_view(), name="job-events"),
    path("events/", EventListApi.as_view(), name="events"),
    *incidents_urlpatterns,
]

"""Event history over REST, in ``seq`` order with keyset pages (the websocket resumes from the same seq)."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics

from apps.accounts.permissions import MAX_BIGINT, job_for_request
from apps.accounts.selectors import jobs_visible_to
from apps.api.events.serializers import EventOutputSerializer, FeedEventOutputSerializer
from apps.core.api_errors import field_error
from apps.core.numbers import is_ascii_digits
from apps.core.pagination import EventIdPagination, EventSeqPagination
from apps.events.models import JobEvent

MAX_KINDS = 20
KIND_PARAMETER = OpenApiParameter(
    "kind",
    OpenApiTypes.STR,
    required=False,
    description="Only these kinds, comma-separated (policy.applied,fault.detected); 'fault.*' = a family",
)
JOB_PARAMETER = OpenApiParameter(
    "job", OpenApiTypes.INT, required=False, description="Only this job's events"
)


def filter_kinds(events: QuerySet[JobEvent], raw: str | None) -> QuerySet[JobEvent]:
    """``kind=a,b`` exact kinds, ``kind=fault.*`` a family; a 400 naming ``kind`` on nonsense."""
    if raw is None or raw == "":
        return events
    kinds = [part.strip() for part in raw.split(",") if part.strip()]
    if len(kinds) > MAX_KINDS or any(len(kind) > 48 or "\x00" in kind for kind in kinds):
        raise field_error(
            "kind", f"kind takes up to {MAX_KINDS} comma-separated kinds of at most 48 characters."
        )
    match = Q()
    for kind in kinds:
        match |= Q(kind__startswith=kind[:-1]) if kind.endswith(".*") else Q(kind=kind)
    return events.filter(match)


@extend_schema(tags=["events"], summary="A job's events, ordered by seq", parameters=[KIND_PARAMETER])
class JobEventListApi(generics.ListAPIView):
    serializer_class = EventOutputSerializer
    pagination_class = EventSeqPagination

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request, no job
            return JobEvent.objects.none()
        job = job_for_request(self.request, self.kwargs["job_id"])
        return filter_kinds(JobEvent.objects.filter(job=job), self.request.query_params.get("kind"))


@extend_schema(
    tags=["events"],
    summary="Events of every job this user may see, in storage order",
    parameters=[KIND_PARAMETER, JOB_PARAMETER],
)
class EventListApi(generics.ListAPIView):
    serializer_class = FeedEventOutputSerializer
    pagination_class = EventIdPagination

    def get_queryset(self) -> Any:
        events = JobEvent.objects.filter(job__in=jobs_visible_to(self.request.user).values("pk"))
        job = self.request.query_params.get("job")
        if job:
            if not is_ascii_digits(job) or not 0 < int(job) <= MAX_BIGINT:
                raise field_error("job", "job must be a job id (a positive integer).", "invalid_type")
            events = events.filter(job_id=int(job))
        return filter_kinds(events, self.request.query_params.get("kind"))

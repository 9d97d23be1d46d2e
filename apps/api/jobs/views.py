"""Clusters and jobs: list/retrieve through a router, registration as ``POST /jobs/``."""

from __future__ import annotations

from typing import Any, cast

from django.db.models import QuerySet
from django.http import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import generics, mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts.actors import actor_for
from apps.accounts.models import Role
from apps.accounts.permissions import job_for_request
from apps.accounts.selectors import (
    clusters_visible_to,
    has_role,
    jobs_visible_to,
    live_job_counts_visible_to,
    role_in_namespace,
    visibility_key,
)
from apps.api.jobs.filters import STRATEGY_CHOICES, JobFilter
from apps.api.jobs.list_rows import json_page, unfiltered_json_page
from apps.api.jobs.ordering import DEFAULT_ORDER, ORDERING_CHOICES, ORDERING_PARAM, list_ordering
from apps.api.jobs.serializers import (
    JOB_LIST_COLUMNS,
    ClusterOutputSerializer,
    JobDetailOutputSerializer,
    JobListOutputSerializer,
    JobOutputSerializer,
    JobRegisterInputSerializer,
    job_detail_output,
    job_output,
    job_rows_output,
)
from apps.core.api_errors import ApiError, ErrorResponseSerializer, field_error, forbidden
from apps.core.api_inputs import valid_input
from apps.core.compiled import AroundSubquery
from apps.core.numbers import is_ascii_digits
from apps.core.pagination import BoundedLimitOffsetPagination
from apps.core.sql_json import database_renders_datetimes
from apps.jobs.models import Cluster, TrainingJob
from apps.jobs.services import JobAlreadyRegistered, job_register
from apps.policies.in_effect_cache import with_rows_fingerprint
from apps.policies.listing import IN_EFFECT_STATES

ORDERING_PARAMETER = OpenApiParameter(
    ORDERING_PARAM,
    OpenApiTypes.STR,
    OpenApiParameter.QUERY,
    required=False,
    enum=list(ORDERING_CHOICES),
    description="Sort key; a leading '-' sorts descending, ties broken by id. Jobs without a fault "
    "(last_fault) or an advice figure (could_save) come last either way. cluster groups by cluster in "
    "the order the clusters were registered, then namespace and name; that is also the default. "
    "Anything else is a 400 listing these values.",
)

# The filters' fixed values as enums (the FilterSet declares them as strings: a value outside them
# must be our 400 listing them, not django-filter's "Select a valid choice").
CHOICE_PARAMETERS = [
    OpenApiParameter(
        name,
        OpenApiTypes.STR,
        OpenApiParameter.QUERY,
        required=False,
        enum=list(values),
        description=JobFilter.base_filters[name].extra["help_text"],
    )
    for name, values in (
        ("strategy", STRATEGY_CHOICES),
        ("in_effect", IN_EFFECT_STATES),
        ("recovering", ("true", "false")),
    )
]


@extend_schema(tags=["clusters"], summary="Clusters this user may see")
class ClusterListApi(generics.ListAPIView):
    serializer_class = ClusterOutputSerializer

    def get_queryset(self) -> QuerySet[Cluster]:
        return clusters_visible_to(self.request.user).order_by("name")


@extend_schema_view(
    list=extend_schema(
        summary="Jobs this user may see: filtered, sorted, paged (count = all that match)",
        tags=["jobs"],
        parameters=[ORDERING_PARAMETER, *CHOICE_PARAMETERS],
        responses=JobListOutputSerializer(many=True),
    ),
    retrieve=extend_schema(
        summary="One job, with what is in effect on it", tags=["jobs"], responses=JobDetailOutputSerializer
    ),
    create=extend_schema(
        summary="Register a job (editor on its namespace)",
        tags=["jobs"],
        request=JobRegisterInputSerializer,
        responses={
            201: JobOutputSerializer,
            409: OpenApiResponse(ErrorResponseSerializer, "Already registered"),
        },
    ),
)
class JobViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    serializer_class = JobOutputSerializer
    filterset_class = JobFilter
    lookup_value_regex = "[0-9]+"

    def get_queryset(self) -> QuerySet[TrainingJob]:
        # Each order is that of an index: a page is a walk along it, never a sort.
        return jobs_visible_to(self.request.user).order_by(*DEFAULT_ORDER)

    def filter_queryset(self, queryset: QuerySet[Any, Any]) -> QuerySet[Any, Any]:
        # With no filter asked for, the FilterSet would only hide deleted jobs; building it deep-copies
        # every declared filter and validates a form: ~6 % of a page's CPU (bench/profile_api.py).
        if not JobFilter.any_given(self.request.query_params):
            return JobFilter.unfiltered(queryset)
        return super().filter_queryset(queryset)

    # A page rendered by the database is a plain HttpResponse (its body already JSON), not a DRF
    # Response to render: DRF's finalize_response accepts either.
    def list(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:  # type: ignore[override]
        order = list_ordering(request)

        def jobs() -> QuerySet[TrainingJob]:
            return self.filter_queryset(self.get_queryset()).order_by(*order)

        if database_renders_datetimes():  # PostgreSQL in UTC renders the page (list_rows.py)
            paginator = cast(BoundedLimitOffsetPagination, self.paginator)
            limit, offset = paginator.get_limit(request), paginator.get_offset(request)
            if JobFilter.any_given(request.query_params):
                count, rows = json_page(jobs(), order, limit=limit, offset=offset)
            else:
                # Every live job the user may see, counted by the sum of their namespaces' live-job
                # counts (kept by the database); both queries compiled once per order and visibility.
                count, rows = unfiltered_json_page(
                    visibility_key(request.user),
                    lambda: (jobs(), live_job_counts_visible_to(request.user)),
                    order,
                    limit=limit,
                    offset=offset,
                )
            return paginator.json_page_response(request, count=count, limit=limit, offset=offset, rows=rows)
        page = self.paginate_queryset(_PageOfRows(jobs(), order))  # type: ignore[arg-type]
        assert page is not None  # every list is paginated (DEFAULT_PAGINATION_CLASS)
        return self.get_paginated_response(job_rows_output(cast(list[dict[str, Any]], page)))

    def get_object(self) -> TrainingJob:
        # The detail serves the in-effect view: its fingerprint comes with the job.
        return job_for_request(self.request, int(self.kwargs["pk"]), extra=with_rows_fingerprint)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return Response(job_detail_output(self.get_object()))

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        values = valid_input(JobRegisterInputSerializer, request.data)
        cluster = _visible_cluster(request, values["cluster"])
        role = role_in_namespace(request.user, cluster=cluster, namespace=values["namespace"])
        if not has_role(role, Role.EDITOR):
            raise forbidden(
                f"Registering a job needs the editor role on namespace {values['namespace']!r} of cluster "
                f"{cluster.name!r}; you have {role or 'no role'}.",
                field="namespace",
            )
        try:
            job = job_register(
                cluster=cluster,
                namespace=values["namespace"],
                name=values["name"],
                framework=values["framework"],
                replicas=values["replicas"],
                npus_per_pod=values["npus_per_pod"],
                mindcluster_version=values["mindcluster_version"],
                actor=actor_for(request),
            )
        except JobAlreadyRegistered as exc:
            raise ApiError(
                str(exc),
                code="already_registered",
                status_code=status.HTTP_409_CONFLICT,
                field="name",
                extra={"job": exc.job.pk},
            ) from None
        return Response(job_output(job), status=status.HTTP_201_CREATED)


class _PageOfRows:
    """What the paginator slices: the count of ``queryset``, and a page of it as list rows.

    A page's ids come from the index alone (OFFSET skips index entries, not rows), and only those
    rows are read, with their cluster name, revision number and advice figure joined in: one query,
    the ids a subquery of it (a round trip less than reading the ids first), its outer part compiled
    once per order.
    """

    def __init__(self, queryset: QuerySet[TrainingJob], order: tuple[Any, ...]) -> None:
        self.queryset = queryset
        self.order = order

    def count(self) -> int:
        return self.queryset.count()

    def __getitem__(self, page: slice) -> list[dict[str, Any]]:
        return _PAGE_ROWS(self.order, self.queryset.values("pk"), page)


def _rows_of(order: tuple[Any, ...], ids: Any) -> QuerySet[TrainingJob, dict[str, Any]]:
    return TrainingJob.objects.filter(pk__in=ids).order_by(*order).values(*JOB_LIST_COLUMNS)


# The rows' query is compiled once per order (apps/core/compiled.py); the page's ids every time.
_PAGE_ROWS: AroundSubquery[dict[str, Any]] = AroundSubquery(_rows_of)


def _visible_cluster(request: Request, ref: str) -> Cluster:
    """The cluster named (or numbered) ``ref`` among those the user may see; else a 400 naming the field."""
    clusters = clusters_visible_to(request.user)
    cluster = clusters.filter(name=ref).first()
    if cluster is None and is_ascii_digits(ref) and len(ref) <= 18:
        cluster = clusters.filter(pk=int(ref)).first()
    if cluster is None:
        raise field_error("cluster", f"No cluster {ref!r} that you may see.", "unknown_cluster")
    return cluster

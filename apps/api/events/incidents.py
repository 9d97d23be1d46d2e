"""REST: a job's incidents (faults grouped with strategies, outcome, durations) and its restart budget.

URL patterns (``incidents_urlpatterns``, to include under ``/api/v1/``):
``jobs/<id>/incidents/`` (paginated, newest first; ``?outcome=open|recovered|rescheduled|failed``),
``jobs/<id>/incidents/<number>/``, ``jobs/<id>/budget/`` (limits, used, left, restarts over time).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.urls import path
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.permissions import job_for_request
from apps.events import selectors
from apps.events.incident_services import restarts_over_time
from apps.events.models import Incident, RestartBudget


class DurationsSerializer(serializers.Serializer):
    detect = serializers.IntegerField(allow_null=True, help_text="Fault → training stopped (ms)")
    decide = serializers.IntegerField(allow_null=True, help_text="Training stopped → first strategy (ms)")
    recover = serializers.IntegerField(allow_null=True, help_text="First strategy → running again (ms)")


class IncidentOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    job = serializers.IntegerField()
    number = serializers.IntegerField()
    outcome = serializers.ChoiceField(choices=Incident.Outcome.choices)
    opened_at = serializers.DateTimeField()
    detected_at = serializers.DateTimeField(allow_null=True)
    decided_at = serializers.DateTimeField(allow_null=True)
    closed_at = serializers.DateTimeField(allow_null=True)
    fault = serializers.DictField(help_text="codes, levels, types, signatures, fault_ids")
    strategies = serializers.ListField(child=serializers.CharField(), help_text="Tried, in order")
    attempts = serializers.ListField(child=serializers.DictField())
    ranks = serializers.ListField(child=serializers.IntegerField())
    nodes = serializers.ListField(child=serializers.CharField())
    decisions = serializers.ListField(child=serializers.DictField())
    durations_ms = DurationsSerializer()
    first_seq = serializers.IntegerField()
    last_seq = serializers.IntegerField()

    def to_representation(self, instance: Incident) -> dict[str, Any]:
        return instance.as_dict()


class LimitSerializer(serializers.Serializer):
    limit = serializers.IntegerField(allow_null=True)
    used = serializers.IntegerField()
    left = serializers.IntegerField(allow_null=True)


class RestartPointSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    kind = serializers.CharField()
    seq = serializers.IntegerField()
    total = serializers.IntegerField()
    reasons = serializers.ListField(child=serializers.CharField())


class BudgetOutputSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    backoff_limit = LimitSerializer()
    fault_retry_times = LimitSerializer()
    max_restarts = LimitSerializer()
    exhausted = serializers.BooleanField()
    restarts = RestartPointSerializer(many=True)


@extend_schema(
    tags=["events"],
    summary="A job's incidents: faults grouped with the strategies tried, outcome and durations",
    parameters=[OpenApiParameter("outcome", str, enum=[c for c, _ in Incident.Outcome.choices])],
)
class JobIncidentListApi(generics.ListAPIView):
    serializer_class = IncidentOutputSerializer

    def get_queryset(self) -> QuerySet[Incident]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request, no job
            return Incident.objects.none()
        job = job_for_request(self.request, int(self.kwargs["job_id"]))
        incidents = selectors.incidents_of(job)
        outcome = self.request.query_params.get("outcome")
        if outcome:
            if outcome not in Incident.Outcome.values:
                raise NotFound(f"unknown outcome {outcome!r}; one of {', '.join(Incident.Outcome.values)}")
            incidents = incidents.filter(outcome=outcome)
        return incidents


@extend_schema(tags=["events"], summary="One incident of a job", responses=IncidentOutputSerializer)
class JobIncidentDetailApi(APIView):
    def get(self, request: Request, job_id: int, number: int) -> Response:
        job = job_for_request(request, job_id)
        incident = selectors.incidents_of(job).filter(number=number).first()
        if incident is None:
            raise NotFound(f"job {job_id} has no incident {number}")
        return Response(incident.as_dict())


@extend_schema(
    tags=["events"],
    summary="A job's restart budget: limits, used, left, restarts over time",
    responses=BudgetOutputSerializer,
)
class JobBudgetApi(APIView):
    def get(self, request: Request, job_id: int) -> Response:
        job = job_for_request(request, job_id)
        # Read-only: a job never seen by the ingester has the default (unlimited, unused) budget.
        budget = RestartBudget.objects.filter(job=job).first() or RestartBudget(job=job)
        return Response({"job": job.pk, **budget.as_dict(), "restarts": restarts_over_time(job)})


incidents_urlpatterns = [
    path("jobs/<int:job_id>/incidents/", JobIncidentListApi.as_view(), name="job-incidents"),
    path("jobs/<int:job_id>/incidents/<int:number>/", JobIncidentDetailApi.as_view(), name="job-incident"),
    path("jobs/<int:job_id>/budget/", JobBudgetApi.as_view(), name="job-budget"),
]

"""``GET /api/v1/jobs/{id}/advice/``: expected lost NPU-hours per week per candidate policy (viewer)."""

from __future__ import annotations

from typing import Any

from django.urls import path
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.permissions import job_for_request
from apps.advice import assumptions as A
from apps.advice.services import advise, summary_store
from apps.core.api_errors import ErrorResponseSerializer, field_error
from apps.core.numbers import is_ascii_digits


class VariedSpecSerializer(serializers.Serializer):
    strategies = serializers.ListField(child=serializers.CharField())
    fault_scheduling = serializers.CharField()
    pod_rescheduling = serializers.BooleanField()


class CandidateSerializer(serializers.Serializer):
    spec = VariedSpecSerializer(help_text="The fields that differ between candidates")
    policy = serializers.DictField(help_text="The whole policy spec: what 'use this' puts in the form")
    expected_lost_npu_hours_per_week = serializers.FloatField(
        allow_null=True, help_text="null: the job fails"
    )
    range = serializers.ListField(child=serializers.FloatField(), allow_null=True, help_text="[low, high]")
    saves_vs_current = serializers.FloatField(allow_null=True)
    job_fails = serializers.BooleanField()
    same_as_current = serializers.BooleanField(help_text="Replays the history exactly as the current policy")
    equivalent_policies = serializers.IntegerField(
        help_text="Valid combinations with the same replayed outcome"
    )
    equivalents = VariedSpecSerializer(many=True, help_text="The other combinations in this group")
    per_fault_kind = serializers.DictField()
    why = serializers.CharField()
    warnings = serializers.ListField(child=serializers.CharField())


class CurrentSerializer(serializers.Serializer):
    spec = VariedSpecSerializer()
    policy = serializers.DictField()
    in_effect = serializers.DictField(
        help_text="source (in-effect, observed-config, current-revision, default) and revision"
    )
    expected_lost_npu_hours_per_week = serializers.FloatField(allow_null=True)
    range = serializers.ListField(child=serializers.FloatField(), allow_null=True)
    job_fails = serializers.BooleanField()
    per_fault_kind = serializers.DictField()
    why = serializers.CharField()


class AssumptionSerializer(serializers.Serializer):
    name = serializers.CharField()
    value = serializers.JSONField()
    range = serializers.ListField(child=serializers.FloatField(), allow_null=True)
    unit = serializers.CharField(allow_null=True)
    # A field named like a Serializer attribute: DRF's metaclass takes it off the class; the stubs don't.
    source = serializers.ChoiceField(choices=["measured", "published", "model", "user", "default"])  # type: ignore[assignment]
    samples = serializers.IntegerField(allow_null=True)
    note = serializers.CharField()


class HistorySerializer(serializers.Serializer):
    faults = serializers.IntegerField()
    since = serializers.DateTimeField()
    days = serializers.FloatField()
    fault_classes = serializers.IntegerField()
    min_samples_for_measured = serializers.IntegerField()


class AdviceSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    npus = serializers.IntegerField()
    current = CurrentSerializer()
    candidates = CandidateSerializer(many=True, help_text="Best first")
    assumptions = AssumptionSerializer(many=True)
    history = HistorySerializer()


def int_param(request: Request, name: str, bounds: tuple[int, int], what: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    low, high = bounds
    digits = raw.strip()
    if not is_ascii_digits(digits) or not low <= int(digits) <= high:
        raise field_error(
            name,
            f"{name} must be a whole number of {what} from {low} to {high}; got {raw[:40]!r}.",
            "out_of_range" if is_ascii_digits(digits) else "invalid",
            allowed=[low, high],
        )
    return int(digits)


@extend_schema(
    tags=["advice"],
    summary="Strategy advice: expected lost NPU-hours/week under each valid policy, from the job's faults",
    parameters=[
        OpenApiParameter(
            "checkpoint_period_s", int, description="Seconds between checkpoints (default 3600)"
        ),
        OpenApiParameter("window_days", int, description="Days of faults to read (default 28)"),
    ],
    responses={200: AdviceSerializer, 400: ErrorResponseSerializer},
)
class JobAdviceApi(APIView):
    def get(self, request: Request, job_id: int) -> Response:
        period = int_param(request, "checkpoint_period_s", A.CHECKPOINT_PERIOD_BOUNDS, "seconds")
        window = int_param(request, "window_days", A.WINDOW_DAYS_BOUNDS, "days")
        job = job_for_request(request, job_id)
        body: dict[str, Any] = advise(job, checkpoint_period_s=period, window_days=window)
        if period is None and window is None:
            summary_store(job, body)  # the fleet view's figure uses the default assumptions only
        return Response(body)


urlpatterns = [path("jobs/<int:job_id>/advice/", JobAdviceApi.as_view(), name="job-advice")]

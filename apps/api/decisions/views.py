"""The decisions inbox (platform mode) and the what-if simulator."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.actors import actor_for, signed_in_user
from apps.accounts.models import Role
from apps.accounts.permissions import MAX_BIGINT, job_for_request
from apps.accounts.selectors import has_role, jobs_visible_to, role_for
from apps.api.decisions.serializers import (
    DecisionAnswerInputSerializer,
    DecisionOutputSerializer,
    SimulateInputSerializer,
    SimulateOutputSerializer,
)
from apps.core.api_errors import ApiError, ErrorResponseSerializer, forbidden
from apps.core.api_inputs import valid_input
from apps.core.errors import ValidationFailed
from apps.decisions.models import Decision
from apps.decisions.services import DecisionChoiceError, DecisionError, decision_answer
from apps.decisions.whatif import ScenarioError, parse_scenario, simulate
from apps.decisions.whatif_start import rehearsal_start
from apps.policies.services import policy_validate_for_job
from apps.policies.validation import validate_policy

STATES = [choice for choice, _ in Decision.State.choices]


@extend_schema(
    tags=["decisions"],
    summary="Platform-mode questions and answers of the jobs you may see",
    parameters=[OpenApiParameter("state", str, enum=STATES, description="e.g. pending: the inbox")],
)
class DecisionListApi(generics.ListAPIView):
    serializer_class = DecisionOutputSerializer

    def get_queryset(self) -> QuerySet[Decision]:
        rows = Decision.objects.filter(job__in=jobs_visible_to(self.request.user)).select_related("job")
        state = self.request.query_params.get("state")
        if state:
            if state not in STATES:
                raise ApiError(
                    f"unknown state {state!r}", code="invalid_choice", field="state", allowed=STATES
                )
            rows = rows.filter(state=state)
        return rows.order_by("-created_at", "-id")


class DecisionDetailApi(APIView):
    """``GET`` one decision; ``POST {"strategy": ...}`` answers a pending one (editor on its namespace)."""

    def _decision(self, request: Request, decision_id: int) -> Decision:
        if not 0 < decision_id <= MAX_BIGINT:
            raise NotFound("No decision with this id (or you may not see it).")
        decision = (
            Decision.objects.filter(pk=decision_id, job__in=jobs_visible_to(request.user))
            .select_related("job__cluster")
            .first()
        )
        if decision is None:
            raise NotFound("No decision with this id (or you may not see it).")
        return decision

    @extend_schema(tags=["decisions"], summary="One decision", responses=DecisionOutputSerializer)
    def get(self, request: Request, decision_id: int) -> Response:
        return Response(DecisionOutputSerializer(self._decision(request, decision_id)).data)

    @extend_schema(
        tags=["decisions"],
        summary="Answer a pending question before its deadline",
        request=DecisionAnswerInputSerializer,
        responses={
            200: DecisionOutputSerializer,
            400: OpenApiResponse(ErrorResponseSerializer, "Not a strategy ClusterD can use here"),
            403: OpenApiResponse(ErrorResponseSerializer, "Viewer only"),
            409: OpenApiResponse(ErrorResponseSerializer, "Already answered or past its deadline"),
        },
    )
    def post(self, request: Request, decision_id: int) -> Response:
        decision = self._decision(request, decision_id)
        role = role_for(request.user, decision.job)
        if not has_role(role, Role.EDITOR):
            raise forbidden(
                f"Answering needs the editor role on namespace {decision.job.namespace!r}; you have "
                f"{role or 'no role'}."
            )
        values = valid_input(DecisionAnswerInputSerializer, request.data)
        actor = actor_for(request)
        try:
            answered = decision_answer(
                decision_id=decision.pk,
                strategy=values["strategy"],
                user=signed_in_user(request),
                token_name=actor.token_name,
                request_id=actor.request_id,
            )
        except DecisionChoiceError as exc:
            raise ApiError(str(exc), code="invalid_choice", field="strategy", allowed=exc.allowed) from exc
        except DecisionError as exc:
            raise ApiError(
                str(exc), code="decision_closed", status_code=status.HTTP_409_CONFLICT, field="strategy"
            ) from exc
        return Response(DecisionOutputSerializer(answered).data)


@extend_schema(tags=["tools"])
class SimulateApi(APIView):
    """``POST /policies/simulate/``: what MindCluster would do, step by step. Writes nothing."""

    @extend_schema(
        summary="Rehearse a policy (draft or a job's current one) against a sequence of faults",
        request=SimulateInputSerializer,
        responses={200: SimulateOutputSerializer, 400: OpenApiResponse(ErrorResponseSerializer)},
    )
    def post(self, request: Request) -> Response:
        values = valid_input(SimulateInputSerializer, request.data)
        job = job_for_request(request, values["job"]) if "job" in values else None
        raw_spec = values.get("spec")
        start = None
        if job is not None:
            # A saved job is rehearsed from what it runs with unless "after-recreation" is asked for.
            start = rehearsal_start(job, raw_spec, values.get("as") or "in-effect")
            raw_spec = start.spec
        elif values.get("as") == "in-effect":
            raise ApiError(
                "'in-effect' needs a saved job: give 'job'",
                code="invalid_choice",
                field="as",
                allowed=["after-recreation"],
            )
        if raw_spec is None and job is not None:
            if job.current_revision is None:
                raise ApiError(
                    "this job has no policy yet: give a draft in 'spec'", code="no_policy", field="job"
                )
            raw_spec = job.current_revision.spec
        result = policy_validate_for_job(job=job, spec=raw_spec) if job else validate_policy(raw_spec)
        if result.spec is None:
            raise ValidationFailed(result.errors, warnings=result.warnings)
        scenario_raw: dict[str, Any] = {
            key: values[key]
            for key in ("faults", "pods", "npus_per_pod", "spare_resources", "supported")
            if key in values
        }
        if job is not None:
            scenario_raw.setdefault("pods", max(1, job.node_nums))
            scenario_raw.setdefault("npus_per_pod", max(1, job.npus_per_pod or 8))
            scenario_raw["framework"] = job.framework
        try:
            scenario = parse_scenario(scenario_raw)
        except ScenarioError as exc:
            raise ApiError(
                exc.message, code="invalid_scenario", field=exc.field.lstrip("/") or None, allowed=exc.allowed
            ) from exc
        outcome = simulate(result.spec, scenario)
        outcome["warnings"] = [issue.to_dict() for issue in result.warnings]
        if start is not None:
            outcome["start"] = start.info
        return Response(outcome)

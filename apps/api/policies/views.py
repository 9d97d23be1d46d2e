"""A job's policy: read, change (new revision), preview, apply, history, restore, and push state.

One APIView per verb; the work is done by services (``policy_revision_create``, ``sync_request_apply``,
``policy_preview``); the views parse input, check the role, and shape the output.
"""

from __future__ import annotations

import re
from typing import Any

from django.db.models import F, Window
from django.db.models.functions import Lag
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.actors import actor_for
from apps.accounts.models import Role
from apps.accounts.permissions import job_for_request
from apps.accounts.selectors import has_role, role_for
from apps.api.policies import examples
from apps.api.policies.bodies import latest_sync, policy_body, policy_job_query
from apps.api.policies.serializers import (
    PolicyOutputSerializer,
    PolicyPutInputSerializer,
    PreviewInputSerializer,
    PreviewOutputSerializer,
    RestoreOutputSerializer,
    RevisionOutputSerializer,
    SyncOutputSerializer,
)
from apps.core.api_errors import ApiError, ErrorResponseSerializer, RevisionConflictSerializer, field_error
from apps.core.api_inputs import valid_input
from apps.jobs.models import TrainingJob
from apps.policies.models import PolicyRevision
from apps.policies.preset_services import preset_resolve
from apps.policies.preview import policy_preview, with_release
from apps.policies.services import policy_revision_create, policy_revision_restore
from apps.policies.syncs import sync_request_apply

TAG = "policies"
MAX_REVISION = 2**31 - 1  # PolicyRevision.number is a 32-bit column
_IF_MATCH = re.compile(r'^\s*(?:W/)?"?(\d{1,10})"?\s*$')
IF_MATCH_PARAMETER = OpenApiParameter(
    "If-Match",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description='The revision the change is based on, as an ETag: "3" (0 = no policy yet); 409 when stale',
)


def _etag(job: TrainingJob) -> str:
    return f'"{job.current_revision.number if job.current_revision else 0}"'


def expected_revision(request: Request, body_revision: int | None) -> int | None:
    """The lost-update guard from ``If-Match`` or the body's ``revision`` (equal when both are given)."""
    header = request.headers.get("If-Match")
    from_header: int | None = None
    if header is not None and header.strip() != "*":
        match = _IF_MATCH.match(header)
        if not match:
            raise field_error(
                "If-Match", 'If-Match must be a revision number as an ETag, e.g. "3".', "invalid_type"
            )
        from_header = int(match.group(1))
    if from_header is not None and body_revision is not None and from_header != body_revision:
        raise field_error(
            "revision",
            f"If-Match says revision {from_header} but the body says {body_revision}.",
            "conflicting_fields",
        )
    return from_header if from_header is not None else body_revision


@extend_schema(tags=[TAG])
class PolicyDetailApi(APIView):
    """``GET``/``PUT /jobs/{id}/policy/``."""

    @extend_schema(summary="The current policy of a job", responses=PolicyOutputSerializer)
    def get(self, request: Request, job_id: int) -> Response:
        # The policy needs no cluster; the in-effect view's fingerprint and the latest push come with
        # the job.
        job = job_for_request(request, job_id, with_cluster=False, extra=policy_job_query)
        return Response(policy_body(job), headers={"ETag": _etag(job)})

    @extend_schema(
        summary="Set the policy: validates and creates a new revision (editor)",
        parameters=[IF_MATCH_PARAMETER],
        request=PolicyPutInputSerializer,
        examples=examples.PUT_POLICY,
        responses={
            200: PolicyOutputSerializer,
            409: OpenApiResponse(RevisionConflictSerializer, "The policy changed since the client read it"),
        },
    )
    def put(self, request: Request, job_id: int) -> Response:
        job = job_for_request(request, job_id, need=Role.EDITOR)
        values = valid_input(PolicyPutInputSerializer, request.data)
        expected = expected_revision(request, values.get("revision"))
        preset = None
        if "preset" in values:
            preset = preset_resolve(values["preset"], cluster=job.cluster, namespace=job.namespace)
            if preset is None:
                raise field_error("preset", f"No preset named {values['preset']!r}.", "unknown_preset")
            spec = preset.spec
        else:
            spec = values["spec"]
        spec = with_release(spec, job.mindcluster_version)
        revision = policy_revision_create(
            job=job,
            spec=spec,
            actor=actor_for(request),
            comment=values.get("comment", ""),
            source=PolicyRevision.Source.PRESET if preset else PolicyRevision.Source.USER,
            preset=preset,
            expected_revision=expected,
        )
        job.current_revision = revision
        return Response(policy_body(job), headers={"ETag": _etag(job)})


@extend_schema(tags=[TAG])
class PolicyPreviewApi(APIView):
    """``POST /jobs/{id}/policy/preview/``: a dry run that writes nothing."""

    @extend_schema(
        summary="Dry run: validation, rendered patches, artifacts and a diff against the live objects",
        request=PreviewInputSerializer,
        examples=examples.PREVIEW,
        responses=PreviewOutputSerializer,
    )
    def post(self, request: Request, job_id: int) -> Response:
        job = job_for_request(request, job_id)
        values = valid_input(PreviewInputSerializer, request.data if request.data is not None else {})
        # The live object is read with the control plane's account: viewers see it redacted.
        viewer_only = not has_role(role_for(request.user, job), Role.EDITOR)
        return Response(policy_preview(job=job, raw_spec=values.get("spec"), redact=viewer_only))


@extend_schema(tags=[TAG])
class PolicyApplyApi(APIView):
    """``POST /jobs/{id}/policy/apply/``: queue a push of the current revision."""

    @extend_schema(
        summary="Queue a push of the current revision (editor)",
        request=None,
        responses={202: SyncOutputSerializer, 409: OpenApiResponse(ErrorResponseSerializer, "No policy yet")},
    )
    def post(self, request: Request, job_id: int) -> Response:
        job = job_for_request(request, job_id, need=Role.EDITOR)
        if job.current_revision is None:
            raise ApiError(
                "The job has no policy yet; PUT one first.",
                code="no_policy",
                status_code=status.HTTP_409_CONFLICT,
            )
        sync = sync_request_apply(job=job)
        return Response(SyncOutputSerializer(sync).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(tags=[TAG], summary="Revision history with author, time, comment, source and diff")
class RevisionListApi(generics.ListAPIView):
    serializer_class = RevisionOutputSerializer

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request, no job
            return PolicyRevision.objects.none()
        job = job_for_request(self.request, self.kwargs["job_id"])
        # The previous spec comes from a window function, so a page costs one query whatever its size.
        return (
            PolicyRevision.objects.filter(job=job)
            .select_related("source_preset")
            .annotate(previous_spec=Window(Lag("spec"), order_by=F("number").asc()))
            .order_by("-number")
        )


@extend_schema(tags=[TAG])
class RevisionRestoreApi(APIView):
    """``POST /jobs/{id}/policy/revisions/{n}/restore/``."""

    @extend_schema(
        summary="Make a copy of revision n the newest revision (editor)",
        request=None,
        responses={201: RestoreOutputSerializer},
    )
    def post(self, request: Request, job_id: int, number: int) -> Response:
        job = job_for_request(request, job_id, need=Role.EDITOR)
        if number > MAX_REVISION or not job.revisions.filter(number=number).exists():
            raise ApiError(
                f"The job has no revision {number}.",
                code="not_found",
                status_code=status.HTTP_404_NOT_FOUND,
                field="number",
            )
        revision = policy_revision_restore(job=job, number=number, actor=actor_for(request))
        # The list's Lag("spec") annotation, set by hand for this one row (RevisionOutputSerializer reads it).
        revision.previous_spec = (  # type: ignore[attr-defined]
            job.revisions.filter(number=revision.number - 1).values_list("spec", flat=True).first()
        )
        sync = latest_sync(job)
        body = {
            "revision": RevisionOutputSerializer(revision).data,
            "sync": SyncOutputSerializer(sync).data if sync else None,
        }
        return Response(body, status=status.HTTP_201_CREATED)


@extend_schema(tags=[TAG])
class SyncDetailApi(APIView):
    """``GET /jobs/{id}/sync/``: the latest push of the job's policy."""

    @extend_schema(
        summary="Latest push: revision, state, attempts, last error, resourceVersions, drift",
        responses=SyncOutputSerializer,
    )
    def get(self, request: Request, job_id: int) -> Response:
        job = job_for_request(request, job_id)
        sync = latest_sync(job)
        if sync is None:
            raise ApiError(
                "The job's policy has never been pushed.",
                code="not_found",
                status_code=status.HTTP_404_NOT_FOUND,
            )
        return Response(SyncOutputSerializer(sync).data)

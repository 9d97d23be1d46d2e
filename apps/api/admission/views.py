"""Namespace default policies (design §4.5) and "recreate to apply" (design §4.6).

Views parse input, check the role and shape output; the work is in ``apps.admission.services``
and ``apps.admission.recreate``.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.actors import actor_for
from apps.accounts.models import Role
from apps.accounts.permissions import job_for_request
from apps.admission.models import NamespaceDefault, NamespaceDefaultRevision, RecreateOperation
from apps.admission.recreate import RecoveryInProgress, RecreateFailed
from apps.admission.recreate_ops import RecreateInProgress, recreate_request
from apps.admission.services import default_for, namespace_default_delete, namespace_default_set
from apps.api.admission.serializers import (
    DefaultPolicyOutputSerializer,
    DefaultPolicyPutSerializer,
    DefaultRevisionOutputSerializer,
    RecreateInputSerializer,
    RecreateOutputSerializer,
)
from apps.api.namespace_scope import namespace_scope
from apps.core.api_errors import ApiError, ErrorResponseSerializer, field_error, ok_or_errors
from apps.core.api_inputs import valid_input
from apps.jobs.models import Cluster
from apps.policies.preset_services import preset_spec_resolve
from apps.policies.validation import validate_policy

TAG = "namespace-defaults"


def default_body(cluster: Cluster, namespace: str, default: NamespaceDefault | None) -> dict[str, Any]:
    revision = default.current_revision if default is not None else None
    warnings = []
    if revision is not None and revision.spec is not None:
        warnings = [i.to_dict() for i in validate_policy(revision.spec).warnings]
    return {
        "cluster": cluster.name,
        "namespace": namespace,
        "revision": revision.number if revision else None,
        "spec": revision.spec if revision else None,
        "preset": revision.preset_name if revision else "",
        "comment": revision.comment if revision else "",
        "author": revision.author_name if revision else "",
        "updated_at": default.updated_at if default is not None else None,
        "warnings": warnings,
    }


@extend_schema(tags=[TAG])
class DefaultPolicyApi(APIView):
    """``GET``/``PUT``/``DELETE /clusters/{cluster}/namespaces/{namespace}/default-policy/``."""

    @extend_schema(
        summary="The default policy new AscendJobs in this namespace get at admission (viewer)",
        responses=ok_or_errors(DefaultPolicyOutputSerializer, 404),
    )
    def get(self, request: Request, cluster: str, namespace: str) -> Response:
        found = namespace_scope(request, cluster, namespace, Role.VIEWER)
        return Response(default_body(found, namespace, default_for(found, namespace)))

    @extend_schema(
        summary="Set the namespace default: a spec or a preset, validated, a new revision (namespace admin)",
        request=DefaultPolicyPutSerializer,
        responses=ok_or_errors(DefaultPolicyOutputSerializer, 400, 403),
    )
    def put(self, request: Request, cluster: str, namespace: str) -> Response:
        found = namespace_scope(request, cluster, namespace, Role.ADMIN)
        values = valid_input(DefaultPolicyPutSerializer, request.data)
        preset_name = values.get("preset", "")
        if preset_name:
            spec = preset_spec_resolve(preset_name, cluster=found, namespace=namespace)
            if spec is None:
                raise field_error("preset", f"No preset named {preset_name!r}.", "unknown_preset")
        else:
            spec = values["spec"]
        default = namespace_default_set(
            cluster=found,
            namespace=namespace,
            spec=spec,
            preset_name=preset_name,
            comment=values.get("comment", ""),
            actor=actor_for(request),
        )
        return Response(default_body(found, namespace, default))

    @extend_schema(
        summary="Remove the namespace default (history kept; namespace admin)",
        responses=ok_or_errors(DefaultPolicyOutputSerializer, 403, 404),
    )
    def delete(self, request: Request, cluster: str, namespace: str) -> Response:
        found = namespace_scope(request, cluster, namespace, Role.ADMIN)
        default = default_for(found, namespace)
        if default is None or default.current_revision is None:
            raise NotFound(f"Namespace {namespace!r} has no default policy.")
        default = namespace_default_delete(default=default, actor=actor_for(request))
        return Response(default_body(found, namespace, default))


@extend_schema(tags=[TAG], summary="History of a namespace default, newest first (viewer)")
class DefaultPolicyRevisionsApi(generics.ListAPIView):
    serializer_class = DefaultRevisionOutputSerializer

    def get_queryset(self) -> QuerySet[NamespaceDefaultRevision]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request to scope
            return NamespaceDefaultRevision.objects.none()
        found = namespace_scope(self.request, self.kwargs["cluster"], self.kwargs["namespace"], Role.VIEWER)
        return NamespaceDefaultRevision.objects.filter(
            default__cluster=found, default__namespace=self.kwargs["namespace"]
        ).order_by("-number")


@extend_schema(tags=["jobs"])
class JobRecreateApi(APIView):
    """``POST /jobs/{id}/recreate/``: record the recreate and queue it (design §4.6)."""

    @extend_schema(
        summary="Delete and re-create the AscendJob with a revision merged, so creation-time keys "
        "take effect (editor; the training restarts from its last checkpoint). Answers 202 once the "
        "manifest is recorded; a Celery task deletes and creates, and its state is at status_url",
        request=RecreateInputSerializer,
        responses={
            202: RecreateOutputSerializer,
            400: ErrorResponseSerializer,
            409: OpenApiResponse(
                ErrorResponseSerializer,
                "Not now: a recovery is in progress (recovery_in_progress), another recreate of this job "
                "is (recreate_in_progress), the job left the cluster (job_deleted), or the cluster could "
                "not be read (recreate_failed)",
            ),
        },
    )
    def post(self, request: Request, job_id: int) -> Response:
        job = job_for_request(request, job_id, need=Role.EDITOR)
        values = valid_input(RecreateInputSerializer, request.data)
        if values["confirm"] != job.name:
            raise field_error(
                "confirm", f"Type the job's name ({job.name!r}) to confirm.", "confirmation_mismatch"
            )
        if job.deleted_at is not None:
            raise ApiError(
                "The job has left the cluster; there is nothing to recreate.",
                code="job_deleted",
                status_code=status.HTTP_409_CONFLICT,
            )
        number = values.get("revision") or (job.current_revision.number if job.current_revision else None)
        revision = job.revisions.filter(number=number).first() if number else None
        if revision is None:
            raise field_error("revision", f"The job has no revision {number}.", "unknown_revision")
        try:
            operation = recreate_request(job=job, revision=revision, actor=actor_for(request))
        except RecoveryInProgress as exc:
            raise ApiError(
                str(exc), code="recovery_in_progress", status_code=status.HTTP_409_CONFLICT
            ) from None
        except RecreateInProgress as exc:
            raise ApiError(
                str(exc), code="recreate_in_progress", status_code=status.HTTP_409_CONFLICT
            ) from None
        except RecreateFailed as exc:
            raise ApiError(str(exc), code="recreate_failed", status_code=status.HTTP_409_CONFLICT) from None
        body = RecreateOutputSerializer(operation).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["status_url"]})


@extend_schema(tags=["jobs"])
class JobRecreateStatusApi(APIView):
    """``GET /jobs/{id}/recreates/{operation}/``."""

    @extend_schema(
        summary="The state and steps of one recreate of the job (viewer)",
        responses=ok_or_errors(RecreateOutputSerializer, 404),
    )
    def get(self, request: Request, job_id: int, operation_id: int) -> Response:
        job = job_for_request(request, job_id, need=Role.VIEWER)
        operation = RecreateOperation.objects.filter(job=job, pk=operation_id).first()
        if operation is None:
            raise NotFound(f"The job has no recreate {operation_id}.")
        return Response(RecreateOutputSerializer(operation).data)

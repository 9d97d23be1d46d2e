"""``/presets/``: named policy templates, global or owned by one namespace.

Global presets (``/presets/{name}/``) are the built-ins, read-only, and those a superuser adds;
every namespace may use them, so only superusers change them. A namespace's presets
(``/clusters/{cluster}/namespaces/{namespace}/presets/{name}/``) are read by its viewers and managed
by its editors. The list shows the global presets and those of the namespaces the user may see
(``?cluster=&namespace=``: what a name can mean there).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.actors import actor_for
from apps.accounts.models import Role
from apps.accounts.selectors import namespace_coverage
from apps.api.namespace_scope import namespace_scope
from apps.api.policies import examples
from apps.api.policies.serializers import (
    PresetCreateInputSerializer,
    PresetOutputSerializer,
    PresetUpdateInputSerializer,
)
from apps.core.api_errors import ApiError, ErrorResponseSerializer, field_error, ok_or_errors
from apps.core.api_inputs import valid_input
from apps.jobs.models import Cluster
from apps.policies.models import Preset
from apps.policies.preset_services import (
    PresetExists,
    PresetForbidden,
    PresetReadOnly,
    preset_create,
    preset_delete,
    preset_may_change,
    preset_update,
)

TAG = "presets"
SCOPE_PARAMETERS = [
    OpenApiParameter("cluster", str, description="With namespace: the presets a name can mean there"),
    OpenApiParameter("namespace", str, description="With cluster: that namespace's own and the global ones"),
]


def _read_only(exc: PresetReadOnly) -> ApiError:
    return ApiError(
        str(exc), code="builtin_preset_read_only", status_code=status.HTTP_403_FORBIDDEN, field="name"
    )


def _check_may_change(request: Request, preset: Preset) -> None:
    # Checked again by the service; here so a refused change is a 403 before its body is read.
    if preset.builtin:
        raise _read_only(PresetReadOnly(preset.name))
    if not preset_may_change(preset, request.user):
        raise PermissionDenied(str(PresetForbidden(preset)))


def _update(request: Request, preset: Preset) -> Response:
    _check_may_change(request, preset)
    values = valid_input(PresetUpdateInputSerializer, request.data)
    if values.get("name", preset.name) != preset.name:
        raise field_error("name", "Presets cannot be renamed; create a new one.", "immutable")
    try:
        preset = preset_update(
            preset=preset, description=values["description"], spec=values["spec"], actor=actor_for(request)
        )
    except PresetReadOnly as exc:
        raise _read_only(exc) from None
    return Response(PresetOutputSerializer(preset).data)


def _destroy(request: Request, preset: Preset) -> Response:
    _check_may_change(request, preset)
    preset_delete(preset=preset, actor=actor_for(request))
    return Response(status=status.HTTP_204_NO_CONTENT)


def _create_scope(request: Request, values: dict[str, Any]) -> tuple[Cluster | None, str]:
    """The cluster and namespace a new preset goes to (checked: editor there), or a global one."""
    cluster_ref, namespace = values.get("cluster", ""), values.get("namespace", "")
    if bool(cluster_ref) != bool(namespace):
        missing = "namespace" if cluster_ref else "cluster"
        raise field_error(missing, "A namespace preset names both its cluster and its namespace.", "required")
    if namespace:
        return namespace_scope(request, cluster_ref, namespace, Role.EDITOR), namespace
    if not request.user.is_superuser:
        raise PermissionDenied(
            "Global presets reach every namespace, so only a superuser may add one; "
            "give cluster and namespace to add a preset to a namespace where you are an editor."
        )
    return None, ""


@extend_schema_view(
    list=extend_schema(
        summary="Presets: global ones and your namespaces'", tags=[TAG], parameters=SCOPE_PARAMETERS
    ),
    retrieve=extend_schema(summary="One global preset", tags=[TAG]),
    create=extend_schema(
        summary="Create a preset in a namespace (its editors) or a global one (superusers)",
        tags=[TAG],
        request=PresetCreateInputSerializer,
        examples=examples.PRESET_CREATE,
        responses={201: PresetOutputSerializer, 409: OpenApiResponse(ErrorResponseSerializer, "Name taken")},
    ),
    update=extend_schema(
        summary="Replace a global preset's description and spec (superusers; built-ins are read-only)",
        tags=[TAG],
        request=PresetUpdateInputSerializer,
        responses=PresetOutputSerializer,
    ),
    destroy=extend_schema(
        summary="Delete a global preset (superusers; built-ins are read-only)",
        tags=[TAG],
        responses={204: None},
    ),
)
class PresetViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = PresetOutputSerializer
    lookup_field = "name"
    lookup_value_regex = "[-a-zA-Z0-9_]{1,63}"
    http_method_names = ["get", "post", "put", "delete", "head", "options"]

    def get_queryset(self) -> QuerySet[Preset]:
        presets = Preset.objects.select_related("created_by", "cluster").order_by("name", "namespace")
        if self.action != "list":
            return presets.filter(namespace="")  # /presets/{name}/ names a global preset
        visible = namespace_coverage(self.request.user)
        if visible is not None:
            presets = presets.filter(Q(namespace="") | visible)
        cluster_ref = self.request.query_params.get("cluster", "")
        namespace = self.request.query_params.get("namespace", "")
        if cluster_ref or namespace:
            cluster = namespace_scope(self.request, cluster_ref, namespace, Role.VIEWER)
            presets = presets.filter(Q(namespace="") | Q(cluster=cluster, namespace=namespace))
        return presets

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        values = valid_input(PresetCreateInputSerializer, request.data)
        cluster, namespace = _create_scope(request, values)
        try:
            preset = preset_create(
                name=values["name"],
                description=values["description"],
                spec=values["spec"],
                actor=actor_for(request),
                cluster=cluster,
                namespace=namespace,
            )
        except PresetExists as exc:
            raise ApiError(
                str(exc), code="already_exists", status_code=status.HTTP_409_CONFLICT, field="name"
            ) from None
        return Response(PresetOutputSerializer(preset).data, status=status.HTTP_201_CREATED)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return _update(request, self.get_object())

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return _destroy(request, self.get_object())


@extend_schema(tags=[TAG])
class NamespacePresetApi(APIView):
    """``GET`` (viewer), ``PUT`` and ``DELETE`` (editor) of one namespace's preset."""

    def _preset(self, request: Request, cluster: str, namespace: str, name: str, need: str) -> Preset:
        found = namespace_scope(request, cluster, namespace, need)
        preset = (
            Preset.objects.select_related("created_by", "cluster")
            .filter(cluster=found, namespace=namespace, name=name)
            .first()
        )
        if preset is None:
            raise NotFound(f"Namespace {namespace!r} has no preset named {name!r}.")
        return preset

    @extend_schema(summary="One preset of a namespace (viewer)", responses=PresetOutputSerializer)
    def get(self, request: Request, cluster: str, namespace: str, name: str) -> Response:
        return Response(
            PresetOutputSerializer(self._preset(request, cluster, namespace, name, Role.VIEWER)).data
        )

    @extend_schema(
        summary="Replace a namespace preset's description and spec (editor)",
        request=PresetUpdateInputSerializer,
        responses=ok_or_errors(PresetOutputSerializer, 400, 403),
    )
    def put(self, request: Request, cluster: str, namespace: str, name: str) -> Response:
        return _update(request, self._preset(request, cluster, namespace, name, Role.EDITOR))

    @extend_schema(summary="Delete a namespace preset (editor)", responses={204: None})
    def delete(self, request: Request, cluster: str, namespace: str, name: str) -> Response:
        return _destroy(request, self._preset(request, cluster, namespace, name, Role.EDITOR))

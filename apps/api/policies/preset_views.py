"""``/presets/``: named policy templates. Everyone reads, editors create, the author or a superuser
changes or deletes, built-ins are read-only."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts.actors import actor_for
from apps.accounts.selectors import is_editor_somewhere
from apps.api.policies import examples
from apps.api.policies.serializers import (
    PresetCreateInputSerializer,
    PresetOutputSerializer,
    PresetUpdateInputSerializer,
)
from apps.core.api_errors import ApiError, ErrorResponseSerializer, field_error
from apps.core.api_inputs import valid_input
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


def _read_only(exc: PresetReadOnly) -> ApiError:
    return ApiError(
        str(exc), code="builtin_preset_read_only", status_code=status.HTTP_403_FORBIDDEN, field="name"
    )


@extend_schema_view(
    list=extend_schema(summary="Presets", tags=[TAG]),
    retrieve=extend_schema(summary="One preset", tags=[TAG]),
    create=extend_schema(
        summary="Create a preset (editor on some namespace)",
        tags=[TAG],
        request=PresetCreateInputSerializer,
        examples=examples.PRESET_CREATE,
        responses={201: PresetOutputSerializer, 409: OpenApiResponse(ErrorResponseSerializer, "Name taken")},
    ),
    update=extend_schema(
        summary="Replace a preset's description and spec (its author or a superuser)",
        tags=[TAG],
        request=PresetUpdateInputSerializer,
        responses=PresetOutputSerializer,
    ),
    destroy=extend_schema(
        summary="Delete a preset (its author or a superuser)", tags=[TAG], responses={204: None}
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
        return Preset.objects.select_related("created_by").order_by("name")

    def _check_may_change(self, preset: Preset) -> None:
        # Checked again by the service; here so a refused change is a 403 before its body is read.
        if preset.builtin:
            raise _read_only(PresetReadOnly(preset.name))
        if not preset_may_change(preset, self.request.user):
            raise PermissionDenied(str(PresetForbidden(preset.name)))

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if not is_editor_somewhere(request.user):
            raise PermissionDenied("Creating presets needs the editor role on at least one namespace.")
        values = valid_input(PresetCreateInputSerializer, request.data)
        try:
            preset = preset_create(
                name=values["name"],
                description=values["description"],
                spec=values["spec"],
                actor=actor_for(request),
            )
        except PresetExists as exc:
            raise ApiError(
                str(exc), code="already_exists", status_code=status.HTTP_409_CONFLICT, field="name"
            ) from None
        return Response(PresetOutputSerializer(preset).data, status=status.HTTP_201_CREATED)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        preset = self.get_object()
        self._check_may_change(preset)
        values = valid_input(PresetUpdateInputSerializer, request.data)
        if values.get("name", preset.name) != preset.name:
            raise field_error("name", "Presets cannot be renamed; create a new one.", "immutable")
        try:
            preset = preset_update(
                preset=preset,
                description=values["description"],
                spec=values["spec"],
                actor=actor_for(request),
            )
        except PresetReadOnly as exc:
            raise _read_only(exc) from None
        return Response(PresetOutputSerializer(preset).data)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        preset = self.get_object()
        self._check_may_change(preset)
        preset_delete(preset=preset, actor=actor_for(request))
        return Response(status=status.HTTP_204_NO_CONTENT)

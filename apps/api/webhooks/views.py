"""``/webhooks/``: outbound webhooks (list, create, read, change, delete), their deliveries, a test.

Administrators only (``apps.events.webhook_services``: the admin role over a webhook's whole scope;
superusers for all). Others get 403 on the list and on create, and 404 for a webhook outside what
they administer. The secret is write-only (``secret_set`` says whether one is set); URLs follow the
admin site's rule (``apps.events.webhook_urls``). Every write is audited with the request's actor,
token name and request id.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import URLValidator
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import generics, mixins, status, viewsets
from rest_framework.exceptions import NotFound
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.actors import actor_for
from apps.accounts.models import ALL_NAMESPACES
from apps.accounts.permissions import MAX_BIGINT
from apps.accounts.selectors import clusters_visible_to, is_admin_somewhere
from apps.api.webhooks.serializers import (
    KINDS,
    WebhookCreateInputSerializer,
    WebhookDeliveryOutputSerializer,
    WebhookOutputSerializer,
    WebhookUpdateInputSerializer,
)
from apps.core.api_errors import ApiError, field_error, forbidden
from apps.core.api_inputs import DNS1123_LABEL, valid_input
from apps.core.numbers import is_ascii_digits
from apps.events.models import Webhook, WebhookDelivery
from apps.events.webhook_services import (
    webhook_create,
    webhook_delete,
    webhook_may_manage,
    webhook_test,
    webhook_update,
    webhooks_administered_by,
)
from apps.events.webhook_urls import SCHEMES, webhook_url_save_problem
from apps.jobs.models import Cluster

TAG = "webhooks"
NOT_FOUND = "No webhook with this id (or you do not administer its namespaces)."
DELIVERY_STATES = [state.value for state in WebhookDelivery.State]
_URLS = URLValidator(schemes=list(SCHEMES))  # the admin form's URLField check


class IsWebhookAdmin(BasePermission):
    """Superusers, and users with the admin role on at least one namespace."""

    message = (
        "Only administrators (superusers, or users with the admin role on a namespace) may read or "
        "change webhooks."
    )

    def has_permission(self, request: Request, view: APIView) -> bool:
        return bool(request.user and request.user.is_authenticated and is_admin_somewhere(request.user))


def _cluster(request: Request, ref: str | None) -> Cluster | None:
    if ref is None:
        return None
    clusters = clusters_visible_to(request.user)
    found = clusters.filter(name=ref).first()
    if found is None and is_ascii_digits(ref) and len(ref) <= 18:
        found = clusters.filter(pk=int(ref)).first()
    if found is None:
        names = list(clusters.order_by("name").values_list("name", flat=True)[:100])
        raise field_error(
            "cluster",
            f"No cluster {ref[:100]!r} that you may see; give one of the allowed names, or null for every "
            "cluster.",
            "invalid_choice",
            allowed=names,
        )
    return found


def _namespace(value: str) -> str:
    if value != ALL_NAMESPACES and not DNS1123_LABEL.match(value):
        raise field_error(
            "namespace",
            'A namespace is "*" (every namespace) or a DNS-1123 label: lower-case letters, digits and '
            "'-', at most 63.",
            "invalid",
        )
    return value


def _url(value: str) -> str:
    try:
        _URLS(value)
    except DjangoValidationError:
        raise field_error(
            "url",
            "Enter a full http:// or https:// URL with a host name (at most 500 characters).",
            "invalid_url",
            allowed=list(SCHEMES),
        ) from None
    problem = webhook_url_save_problem(value)
    if problem:
        raise field_error(
            "url",
            f"This URL cannot be a webhook target: {problem}.",
            "url_not_allowed",
            allowed=list(SCHEMES),
        )
    return value


def _events(values: list[str]) -> list[str]:
    for index, kind in enumerate(values):
        if kind not in KINDS:
            raise field_error(
                f"events.{index}",
                f"{kind[:40]!r} is not a webhook event kind; allowed: {', '.join(KINDS)} (empty list = all).",
                "invalid_choice",
                allowed=KINDS,
            )
    return [kind for kind in KINDS if kind in values]  # once each, in a stable order


def _scope_text(cluster: Cluster | None, namespace: str) -> str:
    where = "every namespace" if namespace == ALL_NAMESPACES else f"namespace {namespace!r}"
    return f"{where} of {'every cluster' if cluster is None else f'cluster {cluster.name!r}'}"


def _checked(request: Request, values: dict[str, Any], hook: Webhook | None = None) -> dict[str, Any]:
    """``values`` with the cluster resolved and every field checked; 403 unless the user administers
    the (new) scope."""
    checked = dict(values)
    if "cluster" in values:
        checked["cluster"] = _cluster(request, values["cluster"])
    if "namespace" in values:
        checked["namespace"] = _namespace(values["namespace"])
    if "url" in values:
        checked["url"] = _url(values["url"])
    if "events" in values:
        checked["events"] = _events(values["events"])
    cluster = checked.get("cluster") if "cluster" in checked else (hook.cluster if hook else None)
    namespace = checked.get("namespace", hook.namespace if hook else ALL_NAMESPACES)
    if not webhook_may_manage(request.user, cluster=cluster, namespace=namespace):
        raise forbidden(
            f"A webhook for {_scope_text(cluster, namespace)} needs the admin role on all of it; "
            "name a cluster and a namespace you administer.",
            field="namespace" if cluster is not None else "cluster",
        )
    return checked


@extend_schema_view(
    list=extend_schema(summary="Webhooks of the namespaces you administer (administrators)", tags=[TAG]),
    retrieve=extend_schema(summary="One webhook (its secret never shown)", tags=[TAG]),
    create=extend_schema(
        summary="Create a webhook (admin of its whole scope; audited)",
        tags=[TAG],
        request=WebhookCreateInputSerializer,
        responses={201: WebhookOutputSerializer},
    ),
    partial_update=extend_schema(
        summary="Change some fields of a webhook (admin of its old and new scope; audited)",
        tags=[TAG],
        request=WebhookUpdateInputSerializer,
        responses=WebhookOutputSerializer,
    ),
    destroy=extend_schema(
        summary="Delete a webhook and its deliveries (audited)", tags=[TAG], responses={204: None}
    ),
)
class WebhookViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = WebhookOutputSerializer
    permission_classes = [IsWebhookAdmin]
    lookup_value_regex = "[0-9]{1,18}"
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self) -> QuerySet[Webhook]:
        return webhooks_administered_by(self.request.user).order_by("name", "id")

    def get_object(self) -> Webhook:
        found = self.get_queryset().filter(pk=int(self.kwargs["pk"])).first()
        if found is None:
            raise NotFound(NOT_FOUND)
        return found

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        values = _checked(request, valid_input(WebhookCreateInputSerializer, request.data))
        hook = webhook_create(actor=actor_for(request), values=values)
        return Response(WebhookOutputSerializer(hook).data, status=status.HTTP_201_CREATED)

    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        hook = self.get_object()
        values = _checked(request, valid_input(WebhookUpdateInputSerializer, request.data), hook)
        hook = webhook_update(hook=hook, actor=actor_for(request), values=values)
        return Response(WebhookOutputSerializer(hook).data)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        webhook_delete(hook=self.get_object(), actor=actor_for(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


def _administered(request: Request, webhook_id: int) -> Webhook:
    if not 0 < webhook_id <= MAX_BIGINT:
        raise NotFound(NOT_FOUND)
    found = webhooks_administered_by(request.user).filter(pk=webhook_id).first()
    if found is None:
        raise NotFound(NOT_FOUND)
    return found


@extend_schema(
    tags=[TAG],
    summary="A webhook's deliveries, newest first: state, attempts, response code, error",
    parameters=[OpenApiParameter("state", str, enum=DELIVERY_STATES, description="Only deliveries in it")],
)
class WebhookDeliveryListApi(generics.ListAPIView):
    serializer_class = WebhookDeliveryOutputSerializer
    permission_classes = [IsWebhookAdmin]
    queryset = WebhookDelivery.objects.none()  # for the schema; get_queryset is what answers

    def get_queryset(self) -> QuerySet[WebhookDelivery]:
        hook = _administered(self.request, self.kwargs["webhook_id"])
        rows = WebhookDelivery.objects.filter(webhook=hook)
        state = self.request.query_params.get("state")
        if state:
            if state not in DELIVERY_STATES:
                raise ApiError(
                    f"unknown state {state[:40]!r}",
                    code="invalid_choice",
                    field="state",
                    allowed=DELIVERY_STATES,
                )
            rows = rows.filter(state=state)
        return rows.order_by("-created_at", "-id")


class WebhookTestApi(APIView):
    """``POST``: queue a signed ``webhook.test`` message through the normal delivery path."""

    permission_classes = [IsWebhookAdmin]

    @extend_schema(
        tags=[TAG],
        summary="Send a test message (queued like any delivery; follow it in deliveries/; audited)",
        request=None,
        responses={202: WebhookDeliveryOutputSerializer},
    )
    def post(self, request: Request, webhook_id: int) -> Response:
        hook = _administered(request, webhook_id)
        delivery = webhook_test(hook=hook, actor=actor_for(request))
        return Response(WebhookDeliveryOutputSerializer(delivery).data, status=status.HTTP_202_ACCEPTED)

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.api_inputs import StrictInputSerializer
from apps.events.models import Webhook, WebhookDelivery

KINDS = [kind.value for kind in Webhook.Kind]
SECRET_MIN_LENGTH = 16


class WebhookOutputSerializer(serializers.ModelSerializer):
    """A webhook as the API shows it: never its secret, only whether one is set."""

    cluster = serializers.CharField(
        source="cluster.name", read_only=True, allow_null=True, default=None, help_text="null = every cluster"
    )
    namespace = serializers.CharField(help_text='"*" = every namespace')
    events = serializers.SerializerMethodField(help_text="Kinds sent; empty = all")
    secret_set = serializers.SerializerMethodField(help_text="Whether an HMAC secret is set (never shown)")

    class Meta:
        model = Webhook
        fields = ["id", "name", "cluster", "namespace", "url", "events", "active", "secret_set", "created_at"]

    @extend_schema_field(serializers.ListField(child=serializers.ChoiceField(choices=Webhook.Kind.choices)))
    def get_events(self, hook: Webhook) -> list[str]:
        return list(hook.events or [])

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_secret_set(self, hook: Webhook) -> bool:
        return bool(hook.secret)


class WebhookDeliveryOutputSerializer(serializers.ModelSerializer):
    response_code = serializers.IntegerField(
        source="last_status", allow_null=True, help_text="HTTP status of the last attempt (null: none)"
    )
    error = serializers.CharField(source="last_error", help_text="Why the last attempt failed, or empty")

    class Meta:
        model = WebhookDelivery
        fields = [
            "id",
            "delivery_id",
            "kind",
            "state",
            "attempts",
            "response_code",
            "error",
            "created_at",
            "delivered_at",
        ]


URL_HELP = "http(s)://host[:port]/path, at most 500 characters, no credentials; public addresses only"
SECRET_HELP = f"HMAC-SHA256 key of the X-Signature header ({SECRET_MIN_LENGTH}-200 characters); write-only"


class WebhookCreateInputSerializer(StrictInputSerializer):
    """A new webhook; unknown keys are refused (``unknown_field``)."""

    name = serializers.CharField(max_length=100)
    cluster = serializers.CharField(
        max_length=100,
        required=False,
        allow_null=True,
        help_text="A cluster's name (or id); null or left out = every cluster",
    )
    namespace = serializers.CharField(
        max_length=63, required=False, help_text='A namespace, or "*" (the default) = every namespace'
    )
    url = serializers.CharField(max_length=500, help_text=URL_HELP)
    secret = serializers.CharField(
        min_length=SECRET_MIN_LENGTH, max_length=200, trim_whitespace=False, help_text=SECRET_HELP
    )
    events = serializers.ListField(
        child=serializers.CharField(max_length=32),
        max_length=len(KINDS),
        required=False,
        help_text=f"Kinds to send, of {', '.join(KINDS)}; empty (the default) = all",
    )
    active = serializers.BooleanField(required=False, help_text="Default true")


class WebhookUpdateInputSerializer(WebhookCreateInputSerializer):
    """The fields to change (PATCH): only those given; unknown keys are refused."""

    name = serializers.CharField(max_length=100, required=False)
    url = serializers.CharField(max_length=500, required=False, help_text=URL_HELP)
    secret = serializers.CharField(
        min_length=SECRET_MIN_LENGTH,
        max_length=200,
        trim_whitespace=False,
        required=False,
        help_text=SECRET_HELP,
    )

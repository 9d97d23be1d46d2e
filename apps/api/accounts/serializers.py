from __future__ import annotations

from rest_framework import serializers

from apps.accounts.models import ApiToken
from apps.core.api_inputs import StrictInputSerializer

MAX_EXPIRY_DAYS = 3650


class TokenOutputSerializer(serializers.ModelSerializer):
    """A token as lists show it: never the key, only its first 8 characters."""

    active = serializers.BooleanField(source="is_active", read_only=True)

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created_at", "last_used_at", "expires_at", "revoked_at", "active"]


class TokenCreatedSerializer(TokenOutputSerializer):
    key = serializers.CharField(help_text="The secret key: shown only in this response, store it now")

    class Meta(TokenOutputSerializer.Meta):
        fields = [*TokenOutputSerializer.Meta.fields, "key"]


class TokenCreateInputSerializer(StrictInputSerializer):
    name = serializers.CharField(
        max_length=100, help_text="A label to recognise the token by, e.g. 'ci-prod'"
    )
    expires_in_days = serializers.IntegerField(
        min_value=1,
        max_value=MAX_EXPIRY_DAYS,
        required=False,
        allow_null=True,
        help_text="Default: never, or the calling token's expiry; never later than the calling token's",
    )

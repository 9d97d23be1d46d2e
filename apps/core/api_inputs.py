"""Input serializers that reject what they do not understand, instead of silently dropping it."""

from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class StrictInputSerializer(serializers.Serializer):
    """A plain input serializer that answers unknown keys with ``unknown_field`` (typos must not pass)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = [key for key in data if key not in self.fields]
            if unknown:
                allowed = sorted(self.fields)
                raise serializers.ValidationError(
                    {
                        str(key): [
                            serializers.ErrorDetail(
                                f"{key!r} is not a field of this request; allowed: {', '.join(allowed)}.",
                                code="unknown_field",
                            )
                        ]
                        for key in unknown
                    }
                )
        return super().to_internal_value(data)


def valid_input(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """``data`` checked by ``serializer_class``: its validated values, or a 400 listing every error."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def validation_error(field: str, message: str, code: str) -> serializers.ValidationError:
    """A serializer's own error on one field (in ``validate``), reported like the field's errors.

    Views raise ``apps.core.api_errors.field_error`` instead; this one stays a ``ValidationError`` so
    DRF collects it with the other field errors of the same body.
    """
    return serializers.ValidationError({field: [serializers.ErrorDetail(message, code=code)]})


def require_exactly_one(attrs: dict[str, Any], first: str, second: str) -> None:
    """Refuse a body that gives both or neither of two alternative fields (reported on ``first``)."""
    if (first in attrs) == (second in attrs):
        raise validation_error(first, f"Give exactly one of {first} and {second}.", "missing_field")


def dns_label_field(what: str, *, max_length: int = 63, **kwargs: Any) -> serializers.RegexField:
    """A Kubernetes DNS-1123 label (lower-case letters, digits and '-', 1-63 characters)."""
    return serializers.RegexField(
        DNS1123_LABEL,
        max_length=max_length,
        error_messages={"invalid": f"{what} must be a DNS-1123 label: lower-case letters, digits and '-'."},
        **kwargs,
    )

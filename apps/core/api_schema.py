"""OpenAPI generation: every operation documents the shared error responses (schemathesis relies on it)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import Direction

from apps.core.api_errors import ErrorResponseSerializer

# Errors any operation can answer; 400/413/415 only where there is input to reject.
_COMMON_ERRORS = ("401", "403", "404", "406", "429")
_INPUT_ERRORS = ("400", "413", "415")


class ErrorAwareAutoSchema(AutoSchema):
    """drf-spectacular schema that documents the shared error responses on every operation."""

    def _get_response_bodies(self, direction: Direction = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        codes = (
            _COMMON_ERRORS + _INPUT_ERRORS
            if self.method in ("POST", "PUT", "PATCH")
            else (*_COMMON_ERRORS, "400")
        )
        for code in codes:
            if code not in responses:
                responses[code] = self._get_response_for_code(
                    ErrorResponseSerializer, code, direction=direction
                )
        return responses

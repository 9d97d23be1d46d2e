"""One error format for the whole API: ``{"errors": [{"code", "field", "message", "allowed"?}]}``.

The DRF exception handler below turns every failure (parse errors, 401/403/404/405/415/429, serializer
errors, the policy validator's ``ValidationFailed``, lost-update conflicts) into that shape. Policy
issues are passed through unchanged, so the API, the form and ``validate_policy`` agree word for word.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import Http404
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response

from apps.core.errors import RevisionConflict, ValidationFailed

log = logging.getLogger(__name__)

# DRF's built-in codes renamed to the validator's where they mean the same thing.
_DRF_CODES = {
    "required": "missing_field",
    "null": "invalid_type",
    "invalid": "invalid_type",
    "not_a_list": "invalid_type",
    "not_a_dict": "invalid_type",
    "max_value": "out_of_range",
    "min_value": "out_of_range",
    "max_string_length": "out_of_range",
    "max_length": "too_long",
    "min_length": "too_short",
    "blank": "blank",
    "invalid_choice": "invalid_choice",
    "parse_error": "parse_error",
    "not_authenticated": "not_authenticated",
    "authentication_failed": "authentication_failed",
    "permission_denied": "permission_denied",
    "not_found": "not_found",
    "method_not_allowed": "method_not_allowed",
    "not_acceptable": "not_acceptable",
    "unsupported_media_type": "unsupported_media_type",
    "throttled": "throttled",
}


def error(
    code: str, message: str, field: str | None = None, allowed: Sequence[Any] | None = None
) -> dict[str, Any]:
    """One error entry; ``allowed`` is included only when there is a closed set of values."""
    entry: dict[str, Any] = {"code": code, "field": field, "message": message}
    if allowed is not None:
        entry["allowed"] = list(allowed)
    return entry


def too_large_body() -> dict[str, Any]:
    """The 413 body for a request body over ``REQUEST_BODY_MAX_BYTES``, naming the limit."""
    limit = settings.REQUEST_BODY_MAX_BYTES
    message = (
        f"The request body is larger than this server accepts: at most {limit} bytes "
        f"({limit / 1024 / 1024:g} MiB). Send a smaller document."
    )
    return {"errors": [error("request_too_large", message, "body")]}


class ApiError(exceptions.APIException):
    """An expected failure a view raises with a precise code, field and status (e.g. 409 conflicts)."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status_code: int = status.HTTP_400_BAD_REQUEST,
        field: str | None = None,
        allowed: Sequence[Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail=message, code=code)
        self.status_code = status_code
        self.entries = [error(code, message, field, allowed)]
        self.extra = extra or {}


def field_error(
    field: str, message: str, code: str = "invalid", allowed: Sequence[Any] | None = None
) -> ApiError:
    """A 400 naming one request field."""
    return ApiError(message, code=code, field=field, allowed=allowed)


def forbidden(message: str, field: str | None = None) -> ApiError:
    """A 403 whose message says which role the action needs and which one the user has."""
    return ApiError(message, code="permission_denied", status_code=status.HTTP_403_FORBIDDEN, field=field)


def _flatten(detail: Any, path: str | None) -> Iterator[dict[str, Any]]:
    """DRF's nested error detail -> flat entries whose ``field`` is a dotted path ("replicas.Master")."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            key = str(key)
            if key in ("non_field_errors", "detail"):
                yield from _flatten(value, path)
            else:
                yield from _flatten(value, f"{path}.{key}" if path else key)
    elif isinstance(detail, list):
        for index, value in enumerate(detail):
            if isinstance(value, dict | list):
                yield from _flatten(value, f"{path}.{index}" if path else str(index))
            else:
                yield from _flatten(value, path)
    else:
        raw_code = getattr(detail, "code", None) or "invalid"
        yield error(_DRF_CODES.get(raw_code, raw_code), str(detail), path)


def _entries_for(exc: exceptions.APIException) -> list[dict[str, Any]]:
    if isinstance(exc, ApiError):
        return exc.entries
    if isinstance(exc, exceptions.ValidationError):
        return list(_flatten(exc.detail, None)) or [error("invalid", "Invalid input.")]
    default_code = getattr(exc, "default_code", "error")
    codes = exc.get_codes()
    code = codes if isinstance(codes, str) else default_code
    message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    return [error(_DRF_CODES.get(code, code), str(message))]


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """``REST_FRAMEWORK["EXCEPTION_HANDLER"]``: every error becomes ``{"errors": [...]}``."""
    if isinstance(exc, ValidationFailed):
        return Response(
            {"errors": [_issue(i) for i in exc.issues], "warnings": [_issue(i) for i in exc.warnings]},
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, RevisionConflict):
        body: dict[str, Any] = {
            "errors": [
                error(
                    "revision_conflict",
                    f"The policy changed since you read it: the current revision is {exc.current}. "
                    "Re-read it, re-apply your change and send If-Match with the new revision.",
                    "revision",
                )
            ],
            "current_revision": exc.current,
        }
        return Response(body, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, RequestDataTooBig):
        return Response(
            too_large_body(),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    elif isinstance(exc, SuspiciousOperation):
        return Response(
            {"errors": [error("bad_request", "The request was rejected as malformed.")]},
            status=status.HTTP_400_BAD_REQUEST,
        )
    if not isinstance(exc, exceptions.APIException):
        log.exception("unhandled error in %s", context.get("view").__class__.__name__)
        return Response(
            {"errors": [error("internal_error", "The server failed unexpectedly; the error was logged.")]},
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    headers: dict[str, str] = {}
    # DRF sets auth_header on the exception in its own handler; Throttled carries wait.
    auth_header = getattr(exc, "auth_header", None)
    if auth_header:
        headers["WWW-Authenticate"] = auth_header
    wait = getattr(exc, "wait", None)
    if wait:
        headers["Retry-After"] = str(int(wait))
    body = {"errors": _entries_for(exc)}
    if isinstance(exc, ApiError):
        body.update(exc.extra)
    return Response(body, status=exc.status_code, headers=headers)


def _issue(issue: Any) -> dict[str, Any]:
    return issue.to_dict() if hasattr(issue, "to_dict") else dict(issue)


# --- schema --------------------------------------------------------------------------------------------
class ErrorSerializer(serializers.Serializer):
    """One problem with a request."""

    code = serializers.CharField(
        help_text="Stable snake_case code (the policy validator's codes for policies)"
    )
    field = serializers.CharField(
        allow_null=True, help_text="Request field (dotted), JSON pointer into a policy, or null"
    )
    message = serializers.CharField(help_text="One sentence that says what is wrong and why")
    allowed = serializers.ListField(
        child=serializers.JSONField(), required=False, help_text="Allowed values, or [min, max] for a range"
    )
    severity = serializers.ChoiceField(choices=["error", "warning"], required=False)


class ErrorResponseSerializer(serializers.Serializer):
    """The body of every error response."""

    # A field named like a Serializer attribute: DRF's metaclass takes it off the class; the stubs don't.
    errors = ErrorSerializer(many=True)  # type: ignore[assignment]
    warnings = ErrorSerializer(many=True, required=False)


def ok_or_errors(ok: Any, *statuses: int) -> dict[int, Any]:
    """The documented responses of an endpoint: ``ok`` for 200, the error body for each of ``statuses``."""
    return {200: ok, **dict.fromkeys(statuses, ErrorResponseSerializer)}


class RevisionConflictSerializer(ErrorResponseSerializer):
    """409: the revision the client based its change on is not the current one."""

    current_revision = serializers.IntegerField()

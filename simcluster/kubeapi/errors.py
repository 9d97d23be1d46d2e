"""Kubernetes ``Status`` failure objects, shaped exactly like the real apiserver's.

Every error the emulator returns goes through :class:`ApiError` so clients always get a ``Status``
body (``kind: Status``) with the HTTP code mirrored in ``code`` - the official client parses these
into ``ApiException.body`` and product code branches on ``reason``.
"""

from __future__ import annotations

from typing import Any

# HTTP code -> canonical StatusReason (k8s.io/apimachinery/pkg/apis/meta/v1/types.go).
REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_dict(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


class ApiError(Exception):
    """An error answered as a ``Status`` object with HTTP status ``code``."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown" if code < 500 else "InternalError")
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        return status_dict(self.code, self.reason, self.message, self.details)


def _details(group: str, kind: str, name: str | None) -> dict[str, Any]:
    # The apiserver omits empty fields (``group`` is "" for core resources).
    out: dict[str, Any] = {}
    if name:
        out["name"] = name
    if group:
        out["group"] = group
    out["kind"] = kind
    return out


def qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404, f'{qualified(plural, group)} "{name}" not found', details=_details(group, plural, name)
    )


def path_not_found() -> ApiError:
    return ApiError(404, "the server could not find the requested resource", details={})


def method_not_allowed() -> ApiError:
    return ApiError(405, "the server does not allow this method on the requested resource", details={})


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        f'{qualified(plural, group)} "{name}" already exists',
        reason="AlreadyExists",
        details=_details(group, plural, name),
    )


CONFLICT_TEXT = "the object has been modified; please apply your changes to the latest version and try again"


def conflict(plural: str, group: str, name: str, why: str = CONFLICT_TEXT) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": {why}',
        reason="Conflict",
        details=_details(group, plural, name),
    )


def invalid(kind: str, group: str, name: str, causes: list[dict[str, str]]) -> ApiError:
    """422 Invalid; ``causes`` are ``{reason, message, field}`` like field.ErrorList renders them."""
    summary = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    what = f"{kind}.{group}" if group else kind
    details = _details(group, kind, name)
    details["causes"] = causes
    if len(causes) > 1:
        summary = f"[{summary}]"
    return ApiError(422, f'{what} "{name}" is invalid: {summary}', reason="Invalid", details=details)


def expired(message: str) -> ApiError:
    return ApiError(410, message, reason="Expired")


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        f"the body of the request was in an unknown format - accepted media types include: "
        f"application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, "
        f"application/strategic-merge-patch+json (got {content_type!r})",
    )

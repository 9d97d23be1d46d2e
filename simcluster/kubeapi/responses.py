"""JSON responses and Kubernetes ``Status`` errors, shared by the API server and the pod-log endpoint."""

from __future__ import annotations

from aiohttp import web

from .errors import ApiError
from .store import dumps


def json_response(code: int, raw: bytes, headers: dict[str, str] | None = None) -> web.Response:
    resp = web.Response(body=raw, status=code, content_type="application/json", headers=headers)
    resp.headers["Cache-Control"] = "no-cache, private"
    return resp


def error_response(err: ApiError) -> web.Response:
    return json_response(err.code, dumps(err.status()), headers=err.headers)

"""Pagination for every list: limit/offset with bounded numbers, and keyset pages for event streams."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any
from urllib import parse

from django.db.models import QuerySet
from django.http import HttpResponse
from rest_framework.pagination import BasePagination, LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from apps.core.api_errors import field_error

MAX_PAGE_SIZE = 500
# PostgreSQL's OFFSET is a bigint; anything larger is a 400 rather than a database error.
MAX_OFFSET = 2**62


def bounded_int(
    request: Request, name: str, *, default: int | None, minimum: int, maximum: int
) -> int | None:
    """A query parameter as an int within [minimum, maximum]; a 400 naming it otherwise."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isascii() or not raw.lstrip("-").isdigit() or len(raw) > 20:
        raise field_error(name, f"{name} must be an integer between {minimum} and {maximum}.", "invalid_type")
    value = int(raw)
    if not minimum <= value <= maximum:
        raise field_error(
            name,
            f"{name} must be between {minimum} and {maximum}, got {value}.",
            "out_of_range",
            [minimum, maximum],
        )
    return value


def integer_query_param(name: str, description: str, minimum: int, maximum: int) -> dict[str, Any]:
    """An optional integer query parameter as the OpenAPI schema describes it."""
    return {
        "name": name,
        "required": False,
        "in": "query",
        "description": description,
        "schema": {"type": "integer", "minimum": minimum, "maximum": maximum},
    }


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """``?limit=&offset=`` with a default of 50, a cap of 500 and a clear 400 on nonsense."""

    default_limit = 50
    max_limit = MAX_PAGE_SIZE

    def get_limit(self, request: Request) -> int:
        return (
            bounded_int(
                request, self.limit_query_param, default=self.default_limit, minimum=1, maximum=self.max_limit
            )
            or self.default_limit
        )

    def get_offset(self, request: Request) -> int:
        return bounded_int(request, self.offset_query_param, default=0, minimum=0, maximum=MAX_OFFSET) or 0

    # The links as DRF's LimitOffsetPagination writes them (the request's URL with limit and offset
    # replaced, the query sorted), with the URL parsed once for both instead of twice for each:
    # that was a tenth of a jobs-list page's CPU (bench/profile_api.py). tests/core/test_pagination.py
    # compares the two on generated query strings.
    def get_next_link(self) -> str | None:
        count, limit, offset = self._numbers()
        if offset + limit >= count:
            return None
        return self._link(offset + limit)

    def get_previous_link(self) -> str | None:
        _, limit, offset = self._numbers()
        if offset <= 0:
            return None
        return self._link(offset - limit if offset - limit > 0 else None)

    def _numbers(self) -> tuple[int, int, int]:
        """count, limit and offset, set by paginating (DRF declares them optional)."""
        assert self.count is not None and self.limit is not None and self.offset is not None
        return self.count, self.limit, self.offset

    def _link(self, offset: int | None) -> str:
        request = self.request
        assert request is not None
        parsed = getattr(self, "_parsed_url", None)
        if parsed is None or parsed[0] is not request:
            scheme, netloc, path, query, fragment = parse.urlsplit(request.build_absolute_uri())
            params = parse.parse_qs(query, keep_blank_values=True)
            params[self.limit_query_param] = [str(self.limit)]
            parsed = self._parsed_url = (request, (scheme, netloc, path, fragment), params)
        _, (scheme, netloc, path, fragment), params = parsed
        params = dict(params)
        if offset is None:
            params.pop(self.offset_query_param, None)
        else:
            params[self.offset_query_param] = [str(offset)]
        query = parse.urlencode(sorted(params.items()), doseq=True)
        return parse.urlunsplit((scheme, netloc, path, query, fragment))

    def json_page_response(
        self, request: Request, *, count: int, limit: int, offset: int, rows: list[str]
    ) -> HttpResponse:
        """The page ``get_paginated_response`` would give, its rows already JSON texts (rendered by
        the database: apps/api/jobs/list_rows.py), written as DRF's JSONRenderer writes a body."""
        self.count, self.limit, self.offset, self.request = count, limit, offset, request
        head = json.dumps(
            {"count": count, "next": self.get_next_link(), "previous": self.get_previous_link()},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        body = f'{head[:-1]},"results":[{",".join(rows)}]}}'
        # As JSONRenderer does: the two line separators JSON allows in strings and JavaScript does not.
        body = body.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
        return HttpResponse(body.encode(), content_type="application/json")

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        base = super().get_paginated_response_schema(schema)
        base["required"] = ["count", "next", "previous", "results"]
        return base

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            integer_query_param(
                self.limit_query_param, f"Page size (default {self.default_limit})", 1, self.max_limit
            ),
            integer_query_param(self.offset_query_param, "Rows to skip", 0, MAX_OFFSET),
        ]


class KeysetPagination(BasePagination):
    """``?after_<key>=N&limit=``: rows with key > N in key order. Stable under inserts, no COUNT query."""

    key = "seq"
    default_limit = 100
    max_limit = MAX_PAGE_SIZE

    @property
    def after_param(self) -> str:
        return f"after_{self.key}"

    def paginate_queryset(
        self, queryset: QuerySet[Any, Any] | Sequence[Any], request: Request, view: Any = None
    ) -> list[Any]:
        if not isinstance(queryset, QuerySet):
            raise TypeError("KeysetPagination pages a QuerySet: it filters and orders on the key")
        after = bounded_int(request, self.after_param, default=0, minimum=0, maximum=2**63 - 1) or 0
        self.limit = (
            bounded_int(request, "limit", default=self.default_limit, minimum=1, maximum=self.max_limit)
            or self.default_limit
        )
        self.request = request
        # One row more than asked tells whether there is a next page without a COUNT.
        rows = list(queryset.filter(**{f"{self.key}__gt": after}).order_by(self.key)[: self.limit + 1])
        self.has_next = len(rows) > self.limit
        self.page = rows[: self.limit]
        return self.page

    def get_paginated_response(self, data: Any) -> Response:
        last = getattr(self.page[-1], self.key) if self.page else None
        next_url = None
        if self.has_next and last is not None:
            next_url = replace_query_param(self.request.build_absolute_uri(), self.after_param, last)
        return Response(OrderedDict([("next", next_url), (f"last_{self.key}", last), ("results", data)]))

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["next", f"last_{self.key}", "results"],
            "properties": {
                "next": {
                    "type": "string",
                    "nullable": True,
                    "format": "uri",
                    "description": f"The next page (same filters, {self.after_param} = last_{self.key})",
                },
                f"last_{self.key}": {
                    "type": "integer",
                    "nullable": True,
                    "description": "Resume from here with " + self.after_param,
                },
                "results": schema,
            },
        }

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            integer_query_param(
                self.after_param, f"Only rows with {self.key} greater than this (resume point)", 0, 2**63 - 1
            ),
            integer_query_param("limit", "Page size (default 100)", 1, self.max_limit),
        ]


class EventSeqPagination(KeysetPagination):
    key = "seq"


class EventIdPagination(KeysetPagination):
    key = "id"

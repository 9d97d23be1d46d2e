"""The list pages' links are written as DRF's LimitOffsetPagination writes them, with the request's
URL parsed once (apps/core/pagination.py): the same links for any query string."""

from __future__ import annotations

from urllib.parse import quote

from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from apps.core.pagination import BoundedLimitOffsetPagination

_FACTORY = APIRequestFactory()
_KEYS = st.sampled_from(["limit", "offset", "ordering", "q", "a b", "ü", "", "x+y"])
_VALUES = st.text(max_size=8)


def _links(paginator: LimitOffsetPagination, request: Request, count: int, limit: int, offset: int) -> tuple:
    paginator.count, paginator.limit, paginator.offset, paginator.request = count, limit, offset, request
    return paginator.get_next_link(), paginator.get_previous_link()


@settings(max_examples=300, deadline=None)
@given(
    pairs=st.lists(st.tuples(_KEYS, _VALUES), max_size=5),
    raw_tail=st.sampled_from(["", "&", "&&flag", "&%ff=%zz", "&k=%E2%80%A8"]),
    count=st.integers(0, 500),
    limit=st.integers(1, 60),
    offset=st.integers(0, 600),
)
def test_links_equal_drfs(
    pairs: list[tuple[str, str]], raw_tail: str, count: int, limit: int, offset: int
) -> None:
    query = "&".join(f"{quote(key)}={quote(value)}" for key, value in pairs) + raw_tail
    request = Request(_FACTORY.get(f"/api/v1/jobs/?{query}"))
    ours = _links(BoundedLimitOffsetPagination(), request, count, limit, offset)
    assert ours == _links(LimitOffsetPagination(), request, count, limit, offset)

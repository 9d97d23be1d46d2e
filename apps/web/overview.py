"""The jobs overview at any size: one page of rows, filtered and sorted by the server, and the total.

The page takes the jobs list API's own parameters (``apps/api/jobs/``: its filters, ``ordering``,
``limit`` and ``offset``) and answers with the same 400s, so a page of the overview and a page of
``GET /api/v1/jobs/`` are the same jobs in the same order; only the row differs (the overview's has
sync state, restarts, the last incident and the in-effect brief).
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any, Final

from django.contrib.auth.models import AnonymousUser, User
from django.core.cache import cache
from django.http import HttpRequest
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

from apps.accounts.selectors import clusters_visible_to, grant_rows, jobs_visible_to
from apps.api.jobs.filters import STRATEGY_CHOICES, JobFilter
from apps.api.jobs.ordering import ORDERING_CHOICES, list_ordering
from apps.core.api_errors import ApiError, api_exception_handler
from apps.core.pagination import BoundedLimitOffsetPagination
from apps.jobs.models import TrainingJob
from apps.policies.listing import IN_EFFECT_STATES
from apps.web.summaries import job_summaries_for_ids

MAX_CHOICES = 500  # distinct namespaces or phases offered in a filter; more are typed, not picked
CHOICES_CACHE_SECONDS: Final = 30
log = logging.getLogger(__name__)


class BadQuery(Exception):
    """A query parameter the list refuses; ``body`` and ``status`` are the API's 400."""

    def __init__(self, body: dict[str, Any], status: int) -> None:
        super().__init__(str(body))
        self.body, self.status = body, status


def overview_page(request: HttpRequest) -> dict[str, Any]:
    """``{count, offset, limit, ordering, results}`` for the query string of ``request``."""
    drf = Request(request)
    try:
        order = list_ordering(drf)
        filters = JobFilter(request.GET, queryset=jobs_visible_to(request.user), request=drf)
        if not filters.is_valid():
            raise ValidationError(filters.errors)
        queryset = filters.qs.order_by(*order)
        pages = BoundedLimitOffsetPagination()
        ids = pages.paginate_queryset(queryset.values_list("pk", flat=True), drf)
    except (ApiError, ValidationError) as exc:
        answer = api_exception_handler(exc, {"request": drf})
        assert answer is not None  # both are API exceptions
        raise BadQuery(dict(answer.data), answer.status_code) from None
    return {
        "count": pages.count,
        "offset": pages.offset,
        "limit": pages.limit,
        "ordering": request.GET.get("ordering", ""),
        "results": job_summaries_for_ids(request.user, list(ids or [])),
    }


def filter_choices(user: User | AnonymousUser) -> dict[str, list[str]]:
    """The values each filter offers, kept ``CHOICES_CACHE_SECONDS`` in the shared cache per grant set.

    Listing the distinct namespaces and phases walks every visible job's index entry (100,000 jobs:
    ~50 ms each on a quiet machine, several times that on a busy one), and the page's first paint
    waits for them. The key is the user's grants and the newest job (``_choices_key``), so a granted or
    revoked namespace and a newly adopted job's namespace show at once; a new phase may show half a
    minute late (a value not offered yet can still be typed in the URL).
    """
    key = _choices_key(user)
    try:
        cached = cache.get(key)
    except Exception:  # the cache is an optimisation: without Redis the page still renders
        log.warning("overview choices: cache unavailable", exc_info=True)
        cached = None
    if cached is not None:
        return dict(cached)
    choices = _filter_choices(user)
    try:
        cache.set(key, choices, CHOICES_CACHE_SECONDS)
    except Exception:
        log.warning("overview choices: cache unavailable", exc_info=True)
    return choices


def _choices_key(user: User | AnonymousUser) -> str:
    """The user's grants and the newest job's id: a new grant or a newly adopted job (perhaps in a new
    namespace) makes a new key; a phase change shows when the entry expires."""
    newest = TrainingJob.objects.order_by("-pk").values_list("pk", flat=True).first()
    if not user.is_authenticated:
        return f"overview-choices:anonymous:{newest}"
    scope = (user.pk, bool(user.is_superuser), sorted(grant_rows(user), key=repr), newest)
    return "overview-choices:" + hashlib.sha256(repr(scope).encode()).hexdigest()[:32]


def _filter_choices(user: User | AnonymousUser) -> dict[str, list[str]]:
    """The values each filter offers: three small queries, each on an index."""
    live = jobs_visible_to(user).filter(deleted_at__isnull=True)

    def distinct(column: str) -> list[str]:
        values = live.order_by(column).values_list(column, flat=True).distinct()[:MAX_CHOICES]
        return [value for value in values if value]

    return {
        "cluster": list(clusters_visible_to(user).order_by("name").values_list("name", flat=True)),
        "namespace": distinct("namespace"),
        "phase": distinct("phase"),
        "strategy": list(STRATEGY_CHOICES),
        "in_effect": list(IN_EFFECT_STATES),
        "ordering": list(ORDERING_CHOICES),
    }

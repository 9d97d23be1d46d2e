"""``GET /jobs/?ordering=``: the sorts of the jobs list, each a walk along an index of its own.

Every order ends in the id, so pages never overlap or skip a row whatever ties there are. The
indexes are in ``apps/jobs/models.py`` (``job_live_by_*``).
"""

from __future__ import annotations

from typing import Any

from django.db.models import F, OrderBy
from rest_framework.request import Request

from apps.core.api_errors import field_error

ORDERING_PARAM = "ordering"
# The default keeps the list's historical order: the job_live_list_order index.
DEFAULT_ORDER: tuple[str, ...] = ("cluster_id", "namespace", "name", "id")
_ASCENDING: dict[str, tuple[str, ...]] = {
    "name": ("name", "id"),
    "namespace": ("namespace", "name", "id"),
    # Grouped by cluster in the order the clusters were registered (their ids), not by cluster name:
    # a name is on another table, and sorting by it sorted all 100,000 jobs for every page (0.5 s in
    # bench/bench_overview.py), where the id walks the job_live_list_order index.
    "cluster": ("cluster_id", "namespace", "name", "id"),
    "phase": ("phase", "name", "id"),
    "strategy": ("strategies", "name", "id"),
    "in_effect": ("in_effect_state", "name", "id"),
    "last_fault": ("last_fault_at", "id"),
    "could_save": ("could_save", "id"),
    "created": ("created_at", "id"),
}
SORT_KEYS = tuple(_ASCENDING)
ORDERING_CHOICES = tuple(choice for key in SORT_KEYS for choice in (key, f"-{key}"))
# Empty figures (no fault yet, not priced yet) go last in both directions: they are not "the least".
_NULLS_LAST = {"last_fault_at", "could_save"}


def _term(column: str, descending: bool) -> Any:
    if column in _NULLS_LAST:
        return OrderBy(F(column), descending=descending, nulls_last=True)
    return f"-{column}" if descending else column


def list_ordering(request: Request) -> tuple[Any, ...]:
    """The ``order_by`` terms ``?ordering=`` asks for; a 400 naming the field and the choices otherwise."""
    raw = request.query_params.get(ORDERING_PARAM)
    if raw is None or raw == "":
        return DEFAULT_ORDER
    key = raw[1:] if raw.startswith("-") else raw
    if key not in _ASCENDING:
        raise field_error(
            ORDERING_PARAM,
            f"ordering must be one of {', '.join(ORDERING_CHOICES)} (a leading '-' sorts descending); "
            f"got {raw[:40]!r}.",
            "invalid_choice",
            list(ORDERING_CHOICES),
        )
    return tuple(_term(column, raw.startswith("-")) for column in _ASCENDING[key])


def ordering_schema_parameter() -> dict[str, Any]:
    return {
        "name": ORDERING_PARAM,
        "required": False,
        "in": "query",
        "description": "Sort key; a leading '-' sorts descending. Jobs without a fault or an advice figure "
        "come last either way. Default: cluster, namespace, name.",
        "schema": {"type": "string", "enum": list(ORDERING_CHOICES)},
    }

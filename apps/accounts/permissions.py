"""DRF permission classes built on the role selectors."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.db.models import QuerySet
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from apps.accounts.selectors import has_role, is_admin_somewhere, role_for
from apps.core.compiled import CompiledQuery
from apps.jobs.models import TrainingJob

MAX_BIGINT = 2**63 - 1
NOT_FOUND = "No job with this id (or you may not see it)."

if TYPE_CHECKING:
    from rest_framework.views import APIView


class IsAdminSomewhere(BasePermission):
    """Superusers and users with the admin role on at least one namespace (audit readers)."""

    message = (
        "Only administrators (superusers or users with the admin role on a namespace) may read the audit log."
    )

    def has_permission(self, request: Request, view: APIView) -> bool:
        return bool(request.user and request.user.is_authenticated and is_admin_somewhere(request.user))


# A change to the job query of one endpoint family (a module-level function: its identity keys the
# compiled query), e.g. selecting the in-effect fingerprint with the job (apps/policies/in_effect_cache.py).
JobQueryExtra = Callable[[QuerySet[TrainingJob]], QuerySet[TrainingJob]]

# The lookups of every job endpoint, compiled once per shape (apps/core/compiled.py).
_JOB_LOOKUPS: dict[tuple[bool, JobQueryExtra | None], CompiledQuery[TrainingJob]] = {}
_LOOKUPS_LOCK = threading.Lock()


def _job_lookup(with_cluster: bool, extra: JobQueryExtra | None) -> CompiledQuery[TrainingJob]:
    key = (with_cluster, extra)
    lookup = _JOB_LOOKUPS.get(key)
    if lookup is None:
        related = ("cluster", "current_revision") if with_cluster else ("current_revision",)

        def build(pk: int) -> QuerySet[TrainingJob]:
            jobs = TrainingJob.objects.select_related(*related).filter(pk=pk)
            return (jobs if extra is None else extra(jobs))[:1]

        with _LOOKUPS_LOCK:
            lookup = _JOB_LOOKUPS.setdefault(key, CompiledQuery(build, int))
    return lookup


def job_for_request(
    request: Request,
    job_id: int,
    *,
    need: str = "viewer",
    with_cluster: bool = True,
    extra: JobQueryExtra | None = None,
) -> TrainingJob:
    """The job if the user may see it (else 404) and holds ``need`` on its namespace (else 403).

    Two plain queries, the job by primary key and the user's grants, matched here: this runs on
    every job endpoint, and a visibility filter compiled into the job query costs more to build
    than to run (so did the grants as a subquery of the job's: 3.4 vs 3.0 ms, measured for #26).
    A token's grants come with the token (``apps/accounts/authentication.py``), so for programs
    this is the job query alone. ``with_cluster=False`` leaves the cluster to be loaded only if
    used; ``extra`` changes the job query (the endpoints that serve the in-effect view select its
    fingerprint with the job, which would otherwise be a query of its own).
    """
    if not 0 < job_id <= MAX_BIGINT:  # a bigger id cannot exist; the database would reject the query
        raise NotFound(NOT_FOUND)
    found = _job_lookup(with_cluster, extra)(job_id)
    job = found[0] if found else None
    role = role_for(request.user, job) if job is not None else None
    if job is None or role is None:
        raise NotFound(NOT_FOUND)  # the same answer for "does not exist" and "not yours"
    if not has_role(role, need):
        raise PermissionDenied(
            f"You have the {role} role on namespace {job.namespace!r} of cluster "
            f"{job.cluster.name!r}; this needs {need}."
        )
    return job

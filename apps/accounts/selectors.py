"""Reads that decide who may see and change what. Each visibility check is one SQL filter."""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import Any

from django.contrib.auth.models import AnonymousUser, Group, User
from django.db.models import CharField, Exists, OuterRef, Q, QuerySet
from django.db.models.functions import Cast
from django.db.models.signals import m2m_changed, post_delete, post_save

from apps.accounts.models import ALL_NAMESPACES, ROLE_RANK, ApiToken, NamespaceGrant, Role
from apps.audit.models import AuditEntry
from apps.core.compiled import CompiledQuery
from apps.jobs.models import Cluster, LiveJobCount, TrainingJob

UserLike = User | AnonymousUser
JOB_OBJECT_TYPE = TrainingJob._meta.label_lower


def roles_at_least(role: str) -> list[str]:
    """The roles that include ``role`` (editor -> [editor, admin])."""
    return [name for name, rank in ROLE_RANK.items() if rank >= ROLE_RANK[role]]


def _is_superuser(user: UserLike | None) -> bool:
    return bool(user is not None and user.is_authenticated and getattr(user, "is_superuser", False))


def grants_of(user: UserLike) -> QuerySet[NamespaceGrant]:
    """Grants to the user directly or to any of their groups."""
    if not user.is_authenticated:
        return NamespaceGrant.objects.none()
    return _grants_of_user_id(user.pk)


def _grants_of_user_id(user_id: int) -> QuerySet[NamespaceGrant]:
    return NamespaceGrant.objects.filter(Q(user_id=user_id) | Q(group__user__id=user_id))


# Read on every job endpoint and list: compiled once (apps/core/compiled.py).
_GRANT_ROWS: CompiledQuery[tuple[int | None, str, str]] = CompiledQuery(
    lambda user_id: _grants_of_user_id(user_id).values_list("cluster_id", "namespace", "role"), int
)


def _coverage(user: UserLike, min_role: str) -> Q | None:
    """One filter on jobs equivalent to the user's grants (None = every job).

    The grants are read once (one small query) and turned into plain ``cluster_id``/``namespace``
    conditions, which PostgreSQL answers from the (cluster, namespace, name) index. A correlated
    EXISTS over the grants would be re-evaluated for every job row, which costs tens of
    milliseconds per page at 10,000 jobs.
    """
    rows = _covered(user, min_role)
    if (None, ALL_NAMESPACES) in rows:
        return None  # a grant on every namespace of every cluster
    # Whole clusters as one IN (= ANY), which PostgreSQL checks inside an index walk; a chain of ORs
    # made it sort every visible job for each page of the jobs list (bench/bench_overview.py).
    whole = sorted(
        cluster_id for cluster_id, namespace in rows if namespace == ALL_NAMESPACES and cluster_id is not None
    )
    covered = Q(cluster_id__in=whole) if whole else Q(pk__in=[])
    for cluster_id, namespace in rows:
        if namespace == ALL_NAMESPACES and cluster_id is not None:
            continue
        part = Q(namespace=namespace)
        if cluster_id is not None:
            part &= Q(cluster_id=cluster_id)
        covered |= part
    return covered


def _covered(user: UserLike, min_role: str) -> frozenset[tuple[int | None, str]]:
    """The (cluster_id, namespace) pairs where the user holds ``min_role`` ("*": every namespace)."""
    enough = set(roles_at_least(min_role))
    return frozenset(
        (cluster_id, namespace) for cluster_id, namespace, role in grant_rows(user) if role in enough
    )


def visibility_key(user: UserLike, *, min_role: str = Role.VIEWER) -> Hashable:
    """What ``jobs_visible_to(user, min_role=...)`` (and, for viewers, ``live_job_counts_visible_to``)
    is a function of: users with equal keys get the same filter, and so the same SQL. Kept compiled
    queries are keyed by it (apps/api/jobs/list_rows.py ``unfiltered_json_page``)."""
    if _is_superuser(user):
        return ("every namespace",)
    if not user.is_authenticated:
        return ("no namespace",)
    return (min_role, _covered(user, min_role))


def namespace_coverage(user: UserLike, *, min_role: str = Role.VIEWER) -> Q | None:
    """A filter on ``cluster_id``/``namespace`` columns (of jobs, presets...) matching the
    namespaces where the user holds ``min_role``; None = every namespace. Superusers: None."""
    if _is_superuser(user):
        return None
    if not user.is_authenticated:
        return Q(pk__in=[])
    return _coverage(user, min_role)


def jobs_visible_to(user: UserLike, *, min_role: str = Role.VIEWER) -> QuerySet[TrainingJob]:
    """Jobs the user may see (or, with ``min_role``, change): one filter, no per-row queries."""
    return _in_covered_namespaces(TrainingJob.objects.all(), user, min_role)


def live_job_counts_visible_to(user: UserLike) -> QuerySet[LiveJobCount]:
    """The live-job counts (apps/jobs/models.py ``LiveJobCount``) of the namespaces whose jobs
    ``jobs_visible_to(user)`` lists: their sum is the count of its live jobs, by the same filter."""
    return _in_covered_namespaces(LiveJobCount.objects.all(), user, Role.VIEWER)


def _in_covered_namespaces(rows: QuerySet[Any], user: UserLike, min_role: str) -> QuerySet[Any]:
    """``rows`` (with ``cluster_id`` and ``namespace`` columns) in the namespaces where the user holds
    ``min_role``: all of them for a superuser, none for an anonymous user."""
    if _is_superuser(user):
        return rows
    if not user.is_authenticated:
        return rows.none()
    covered = _coverage(user, min_role)
    return rows if covered is None else rows.filter(covered)


def clusters_visible_to(user: UserLike) -> QuerySet[Cluster]:
    """Clusters where the user holds any grant (a grant without a cluster covers every cluster)."""
    clusters = Cluster.objects.all()
    if _is_superuser(user):
        return clusters
    if not user.is_authenticated:
        return clusters.none()
    covering = grants_of(user).filter(Q(cluster__isnull=True) | Q(cluster=OuterRef("pk")))
    return clusters.filter(Exists(covering))


GrantRow = tuple[int | None, str, str]


def grant_rows(user: UserLike) -> list[GrantRow]:
    """``(cluster_id, namespace, role)`` of every grant the user holds, directly or through a group."""
    if not user.is_authenticated:
        return []
    read_with_user: tuple[int, list[GrantRow]] | None = getattr(user, _READ_WITH_USER, None)
    if read_with_user is not None and read_with_user[0] == _GrantChanges.count:
        return read_with_user[1]
    return _GRANT_ROWS(user.pk)


# The grants read in the same statement as the user (the API token's lookup selects them as JSON:
# every API request needs both, and one round trip less is ~0.4 ms of a job detail's ~3, #26).
# The copy is used only while this process has changed no grant and no group membership since it
# was read; a change made by another process is seen as a separate query would have seen it: by
# the requests that start after it.
_READ_WITH_USER = "_grant_rows_read_with_user"


def grants_json_sql(user_id_column: str) -> str:
    """A scalar subquery: the user's grants (``grant_rows``) as a JSON array of [cluster_id,
    namespace, role], for the user whose id is ``user_id_column`` of the outer query (PostgreSQL)."""
    grants, memberships = NamespaceGrant._meta.db_table, User.groups.through._meta.db_table
    return (
        f"(SELECT COALESCE(json_agg(json_build_array(g.cluster_id, g.namespace, g.role)), '[]')::text"
        f" FROM {grants} g WHERE g.user_id = {user_id_column} OR g.group_id IN"
        f" (SELECT m.group_id FROM {memberships} m WHERE m.user_id = {user_id_column}))"
    )


def remember_grant_rows(user: User, grants_json: str) -> None:
    """Keep on ``user`` (this request's instance) its grants as selected by ``grants_json_sql``."""
    rows = [(cluster_id, namespace, role) for cluster_id, namespace, role in json.loads(grants_json)]
    setattr(user, _READ_WITH_USER, (_GrantChanges.count, rows))


class _GrantChanges:
    """How many grant or group-membership writes this process has made (any change invalidates
    every copy of grants read with a user before it)."""

    count = 0


def _grant_changed(**_: object) -> None:
    _GrantChanges.count += 1


for _signal in (post_save, post_delete):
    _signal.connect(_grant_changed, sender=NamespaceGrant, dispatch_uid=f"grants-{_signal}")
m2m_changed.connect(_grant_changed, sender=User.groups.through, dispatch_uid="grants-memberships")
post_delete.connect(_grant_changed, sender=Group, dispatch_uid="grants-groups")


def role_from_grants(
    rows: list[tuple[int | None, str, str]], *, cluster_id: int | None, namespace: str
) -> str | None:
    """The highest role among ``rows`` that covers (cluster, namespace), or None (``cluster_id`` None:
    every cluster, which only grants without a cluster cover)."""
    best: str | None = None
    for grant_cluster, grant_namespace, role in rows:
        if grant_cluster not in (None, cluster_id):
            continue
        if grant_namespace not in (ALL_NAMESPACES, namespace):
            continue
        if best is None or ROLE_RANK[role] > ROLE_RANK[best]:
            best = role
    return best


def role_in_namespace(user: UserLike, *, cluster: Cluster, namespace: str) -> str | None:
    """The highest role the user holds on ``namespace`` of ``cluster`` (superusers: admin)."""
    return _role_in(user, cluster_id=cluster.pk, namespace=namespace)


def _role_in(user: UserLike, *, cluster_id: int, namespace: str) -> str | None:
    if _is_superuser(user):
        return Role.ADMIN
    if not user.is_authenticated:
        return None
    # The user's grants are a handful of rows: matching them here is one plain query, cheaper to
    # build and run than a filtered aggregate over the grants table.
    return role_from_grants(grant_rows(user), cluster_id=cluster_id, namespace=namespace)


def role_for(user: UserLike, job: TrainingJob) -> str | None:
    """The highest role the user holds on the job's namespace, or None when they may not see it."""
    # By id: the cluster row is not needed (job_for_request(with_cluster=False) leaves it unloaded).
    return _role_in(user, cluster_id=job.cluster_id, namespace=job.namespace)


def has_role(role: str | None, needed: str) -> bool:
    return role is not None and ROLE_RANK[role] >= ROLE_RANK[needed]


def is_admin_somewhere(user: UserLike) -> bool:
    """Superusers, and users holding the admin role on at least one namespace."""
    if _is_superuser(user):
        return True
    return grants_of(user).filter(role=Role.ADMIN).exists()


def is_editor_somewhere(user: UserLike) -> bool:
    if _is_superuser(user):
        return True
    return grants_of(user).filter(role__in=roles_at_least(Role.EDITOR)).exists()


def tokens_of(user: UserLike) -> QuerySet[ApiToken]:
    if not user.is_authenticated:
        return ApiToken.objects.none()
    return ApiToken.objects.filter(user=user)


def audit_visible_to(user: UserLike) -> QuerySet[AuditEntry]:
    """One query: entries about jobs in namespaces the user administers (all entries for superusers)."""
    entries = AuditEntry.objects.all()
    if _is_superuser(user):
        return entries
    administered = (
        jobs_visible_to(user, min_role=Role.ADMIN).annotate(pk_text=Cast("pk", CharField())).values("pk_text")
    )
    return entries.filter(object_type=JOB_OBJECT_TYPE, object_id__in=administered)

"""``OIDC_GROUP_ROLES``: which namespace role each of the provider's groups gives.

The format is a JSON object from group name to an object from namespace to role::

    {"ml-team-a": {"team-a": "editor"}, "sre": {"*": "admin"}, "auditors": {"*": "viewer"}}

Namespaces are DNS labels or ``"*"`` (every namespace); a namespace may be prefixed with a cluster
name, ``"prod/team-a"``, to grant it on that cluster only (otherwise on every cluster). Roles are
the grant roles: ``viewer``, ``editor``, ``admin``. A user in several groups gets the highest role
per namespace. Superuser and staff status never come from the provider.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from apps.accounts.models import ALL_NAMESPACES, ROLE_RANK
from apps.core.api_inputs import DNS1123_LABEL

_CLUSTER = re.compile(r"^[-A-Za-z0-9_.]{1,100}$")


@dataclass(frozen=True, order=True)
class RoleTarget:
    """One place a group's role applies: a namespace (or "*") of one cluster (None = every cluster)."""

    cluster: str | None
    namespace: str


GroupRoles = dict[str, dict[RoleTarget, str]]


def _target(key: str, group: str) -> RoleTarget:
    cluster, _, namespace = key.rpartition("/")
    if namespace != ALL_NAMESPACES and (len(namespace) > 63 or not DNS1123_LABEL.match(namespace)):
        raise ImproperlyConfigured(
            f'OIDC_GROUP_ROLES[{group!r}]: {key!r} is not a namespace (a DNS label or "*", '
            "optionally prefixed with a cluster name and '/')"
        )
    if cluster and not _CLUSTER.match(cluster):
        raise ImproperlyConfigured(f"OIDC_GROUP_ROLES[{group!r}]: {cluster!r} is not a cluster name")
    return RoleTarget(cluster or None, namespace)


def parse_group_roles(raw: str) -> GroupRoles:
    """The mapping from its JSON text; ``ImproperlyConfigured`` naming the entry that is wrong."""
    try:
        data = json.loads(raw or "{}")
    except ValueError as exc:
        raise ImproperlyConfigured(f"OIDC_GROUP_ROLES is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ImproperlyConfigured('OIDC_GROUP_ROLES must be a JSON object: {"group": {"namespace": "role"}}')
    parsed: GroupRoles = {}
    for group, targets in data.items():
        if not isinstance(targets, dict) or not targets:
            raise ImproperlyConfigured(
                f'OIDC_GROUP_ROLES[{group!r}] must be a non-empty object {{"namespace": "role"}}'
            )
        parsed[group] = {}
        for key, role in targets.items():
            if role not in ROLE_RANK:
                raise ImproperlyConfigured(
                    f"OIDC_GROUP_ROLES[{group!r}][{key!r}]: {role!r} is not a role; "
                    f"use one of: {', '.join(ROLE_RANK)}"
                )
            parsed[group][_target(str(key), str(group))] = role
    return parsed


def roles_for_groups(mapping: GroupRoles, groups: list[str]) -> dict[RoleTarget, str]:
    """The highest role per target over the user's groups (groups not in the mapping give nothing)."""
    wanted: dict[RoleTarget, str] = {}
    for group in groups:
        for target, role in mapping.get(group, {}).items():
            if target not in wanted or ROLE_RANK[role] > ROLE_RANK[wanted[target]]:
                wanted[target] = role
    return wanted

"""What one OIDC sign-in changes: the user (matched by issuer and subject), their namespace roles
(granted and revoked to match the provider's groups) and one audit entry. All in one transaction."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import NamespaceGrant, OidcIdentity
from apps.accounts.oidc.group_roles import parse_group_roles, roles_for_groups
from apps.audit.actors import Actor
from apps.audit.services import audit_record
from apps.jobs.models import Cluster

log = logging.getLogger(__name__)

MAX_GROUPS = 1000  # a claim larger than this is refused rather than mapped (and stored) in full
GrantKey = tuple[int | None, str, str]  # (cluster_id, namespace, role)


class BadClaims(ValueError):
    """The provider's claims cannot identify a user (no subject, a malformed groups claim)."""


def groups_of(claims: dict[str, Any]) -> list[str]:
    """The groups claim as a sorted list of names; absent = no groups; a single string = one group."""
    raw = claims.get(settings.OIDC_GROUPS_CLAIM)
    if raw is None:
        return []
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(g, str) for g in raw) or len(raw) > MAX_GROUPS:
        raise BadClaims(
            f"the {settings.OIDC_GROUPS_CLAIM!r} claim must be a list of at most {MAX_GROUPS} names"
        )
    return sorted(set(raw))


def _username_for(claims: dict[str, Any], issuer: str, subject: str) -> str:
    """A readable username (preferred_username, else e-mail, else the subject); when a local account
    has it already, a suffix from (issuer, subject) keeps them apart: OIDC never signs in as a local user."""
    base = str(claims.get("preferred_username") or claims.get("email") or subject)[:130]
    taken = get_user_model().objects.filter(username=base).exists()
    if not taken:
        return base
    suffix = hashlib.sha256(f"{issuer}\0{subject}".encode()).hexdigest()[:10]
    return f"{base}-{suffix}"


def _identity(issuer: str, subject: str, claims: dict[str, Any]) -> tuple[OidcIdentity, bool]:
    identity = (
        OidcIdentity.objects.select_for_update()
        .select_related("user")
        .filter(issuer=issuer, subject=subject)
        .first()
    )
    if identity is not None:
        return identity, False
    user = get_user_model().objects.create_user(_username_for(claims, issuer, subject))
    user.set_unusable_password()  # signs in through the provider only, never with /login/'s form
    user.save(update_fields=["password"])
    return OidcIdentity.objects.create(user=user, issuer=issuer, subject=subject), True


def _wanted_grants(groups: list[str]) -> tuple[set[GrantKey], list[str]]:
    """The (cluster, namespace, role) grants the groups give, and the cluster names not registered."""
    wanted = roles_for_groups(parse_group_roles(settings.OIDC_GROUP_ROLES), groups)
    names = {target.cluster for target in wanted if target.cluster is not None}
    ids = dict(Cluster.objects.filter(name__in=names).values_list("name", "pk"))
    keys: set[GrantKey] = set()
    missing: list[str] = []
    for target, role in sorted(wanted.items()):
        if target.cluster is not None and target.cluster not in ids:
            missing.append(target.cluster)
            continue
        keys.add((ids.get(target.cluster) if target.cluster else None, target.namespace, role))
    return keys, sorted(set(missing))


def _shown(key: GrantKey) -> dict[str, Any]:
    return {"cluster_id": key[0], "namespace": key[1], "role": key[2]}


def sync_oidc_grants(user: User, groups: list[str]) -> tuple[list[GrantKey], list[GrantKey], list[str]]:
    """Make the user's provider-given grants match ``groups``: (granted, revoked, unknown clusters).

    Only grants marked ``from_oidc`` are touched; grants an administrator made by hand stay.
    """
    wanted, missing = _wanted_grants(groups)
    current = {
        (g.cluster_id, g.namespace, g.role): g
        for g in NamespaceGrant.objects.select_for_update().filter(user=user, from_oidc=True)
    }
    revoked = sorted(set(current) - wanted, key=str)
    granted = sorted(wanted - set(current), key=str)
    NamespaceGrant.objects.filter(pk__in=[current[key].pk for key in revoked]).delete()
    NamespaceGrant.objects.bulk_create(
        NamespaceGrant(user=user, cluster_id=c, namespace=ns, role=role, from_oidc=True)
        for c, ns, role in granted
    )
    if missing:
        log.warning("OIDC_GROUP_ROLES names clusters that are not registered: %s", ", ".join(missing))
    return granted, revoked, missing


@transaction.atomic
def oidc_sign_in(*, issuer: str, claims: dict[str, Any], request_id: str = "") -> User | None:
    """The user the provider vouched for, their roles brought up to date, the sign-in audited.

    None when the account was disabled here: an administrator's "inactive" wins over the provider.
    """
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject or len(subject) > 255 or not issuer:
        raise BadClaims("the ID token has no usable subject or issuer")
    groups = groups_of(claims)
    identity, created = _identity(issuer, subject, claims)
    user = identity.user
    if not user.is_active:
        return None
    email = claims.get("email")
    if isinstance(email, str) and email != user.email and len(email) <= 254:
        user.email = email
        user.save(update_fields=["email"])
    granted, revoked, missing = sync_oidc_grants(user, groups)
    identity.groups = groups
    identity.last_login_at = timezone.now()
    identity.save(update_fields=["groups", "last_login_at"])
    audit_record(
        actor=Actor(user=user, request_id=request_id),
        action="user.oidc_login",
        obj=user,
        after={
            "issuer": issuer,
            "subject": subject,
            "groups": groups,
            "user_created": created,
            "granted": [_shown(key) for key in granted],
            "revoked": [_shown(key) for key in revoked],
            "unknown_clusters": missing,
        },
    )
    return user

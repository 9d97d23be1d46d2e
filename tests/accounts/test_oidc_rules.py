"""The rules around an OIDC sign-in that the end-to-end test does not reach: the mapping's format,
ID-token checks the library leaves out, no takeover of local accounts, disabled users stay out."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.test import Client

from apps.accounts.models import NamespaceGrant
from apps.accounts.oidc.backend import check_id_token
from apps.accounts.oidc.group_roles import RoleTarget, parse_group_roles, roles_for_groups
from apps.accounts.oidc.signin import BadClaims, oidc_sign_in
from apps.jobs.models import Cluster

ISSUER = "https://sso.corp.example"


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        ("[1]", "JSON object"),
        ("{nope", "not valid JSON"),
        ('{"g": {"team-a": "operator"}}', "'operator' is not a role"),
        ('{"g": {"Team_A": "viewer"}}', "'Team_A' is not a namespace"),
        ('{"g": {}}', "OIDC_GROUP_ROLES['g']"),
    ],
)
def test_a_wrong_mapping_is_refused_naming_the_entry(raw: str, names: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=re.escape(names)):
        parse_group_roles(raw)


def test_the_highest_role_per_namespace_wins_and_clusters_can_be_named() -> None:
    mapping = parse_group_roles(
        '{"a": {"team-a": "viewer", "prod/team-b": "admin"}, "b": {"team-a": "editor", "*": "viewer"}}'
    )
    assert roles_for_groups(mapping, ["a", "b", "unknown"]) == {
        RoleTarget(None, "team-a"): "editor",
        RoleTarget("prod", "team-b"): "admin",
        RoleTarget(None, "*"): "viewer",
    }


def test_id_tokens_for_another_client_or_issuer_are_refused() -> None:
    good = {"aud": "cp", "iss": ISSUER, "exp": 1, "sub": "s"}
    check_id_token(good, client_id="cp", issuer=ISSUER)
    for bad in (
        {**good, "aud": "other"},
        {**good, "iss": "https://evil"},
        {**good, "aud": ["cp", "x"]},
        {"aud": "cp", "iss": ISSUER},
    ):
        with pytest.raises(SuspiciousOperation):
            check_id_token(bad, client_id="cp", issuer=ISSUER)
    check_id_token({**good, "aud": ["cp", "x"], "azp": "cp"}, client_id="cp", issuer=ISSUER)


@pytest.mark.django_db
def test_a_provider_account_never_becomes_a_local_one_of_the_same_name_or_email(settings: Any) -> None:
    settings.OIDC_GROUP_ROLES = '{"sre": {"*": "admin"}}'
    root = User.objects.create_superuser("root", email="root@corp.example", password="pw")
    user = oidc_sign_in(
        issuer=ISSUER,
        claims={"sub": "x1", "preferred_username": "root", "email": "root@corp.example", "groups": ["sre"]},
    )
    assert user is not None and user.pk != root.pk and user.username.startswith("root-")
    assert not user.is_superuser and not user.has_usable_password()
    assert NamespaceGrant.objects.filter(user=user, from_oidc=True, namespace="*", role="admin").exists()
    assert not NamespaceGrant.objects.filter(user=root).exists()
    again = oidc_sign_in(issuer=ISSUER, claims={"sub": "x1", "preferred_username": "root"})
    assert again == user and not NamespaceGrant.objects.filter(user=user).exists()  # no groups: no roles
    other_issuer = oidc_sign_in(issuer="https://other.example", claims={"sub": "x1"})
    assert other_issuer is not None and other_issuer.pk != user.pk


@pytest.mark.django_db
def test_a_disabled_user_stays_out_and_bad_claims_are_refused(settings: Any) -> None:
    settings.OIDC_GROUP_ROLES = '{"g": {"prod/team-a": "editor"}}'
    user = oidc_sign_in(issuer=ISSUER, claims={"sub": "s2", "groups": ["g"]})
    assert user is not None and not NamespaceGrant.objects.filter(user=user).exists()  # no cluster "prod" yet
    Cluster.objects.create(name="prod")
    assert oidc_sign_in(issuer=ISSUER, claims={"sub": "s2", "groups": "g"}) == user  # one group as a string
    assert NamespaceGrant.objects.get(user=user).cluster.name == "prod"  # type: ignore[union-attr]
    User.objects.filter(pk=user.pk).update(is_active=False)
    assert oidc_sign_in(issuer=ISSUER, claims={"sub": "s2", "groups": ["g"]}) is None
    with pytest.raises(BadClaims):
        oidc_sign_in(issuer=ISSUER, claims={"sub": "s3", "groups": [1, 2]})
    with pytest.raises(BadClaims):
        oidc_sign_in(issuer=ISSUER, claims={"groups": ["g"]})


@pytest.mark.django_db
def test_with_oidc_off_its_routes_are_404_and_the_login_page_has_no_button(client: Client) -> None:
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=x&state=y").status_code == 404
    page = client.get("/login/")
    assert page.status_code == 200 and b"Sign in with" not in page.content


@pytest.mark.django_db
def test_break_glass_sign_in_works_while_the_provider_is_down(client: Client, settings: Any) -> None:
    """The provider unreachable: the local form still signs in, and "Sign in with" answers calmly."""
    from apps.accounts.oidc.provider import forget_discovery

    settings.OIDC_ENABLED = True
    settings.OIDC_RP_CLIENT_ID = "cp"
    settings.OIDC_OP_DISCOVERY_URL = "http://127.0.0.1:9/.well-known/openid-configuration"  # nothing listens
    settings.OIDC_TIMEOUT = 1
    forget_discovery()
    User.objects.create_superuser("root", password="break-glass-pw-1")
    start = client.get("/oidc/authenticate/")
    assert start.status_code == 302 and start["Location"] == "/login/?sso=failed"
    assert b"did not succeed" in client.get("/login/?sso=failed").content
    signed_in = client.post(
        "/login/", {"username": "root", "password": "break-glass-pw-1"}, REMOTE_ADDR="10.0.0.9"
    )
    assert signed_in.status_code == 302 and signed_in["Location"] == "/"
    forget_discovery()

"""A token's lookup selects its user's grants (apps/accounts/authentication.py, #26): the same rows
as the grants query, and never used after this process changed a grant or a group membership."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from apps.accounts import selectors
from apps.accounts.authentication import TokenAuthentication
from apps.accounts.models import NamespaceGrant, Role
from apps.accounts.services import token_issue
from apps.jobs.models import Cluster
from tests.support.world import grant, make_user

pytestmark = pytest.mark.django_db


def _authenticated(key: str) -> User:
    user, _ = TokenAuthentication().authenticate_key(key)
    return user


def _queried(user: User) -> list[tuple[int | None, str, str]]:
    return selectors._GRANT_ROWS(user.pk)


@pytest.fixture
def user_and_key() -> tuple[User, str]:
    user = make_user("reader")
    return user, token_issue(user, "pipeline")[1]


def test_the_grants_read_with_the_token_are_the_grants_query_and_save_its_round_trip(
    user_and_key: tuple[User, str], django_assert_num_queries: object
) -> None:
    user, key = user_and_key
    cluster, other = Cluster.objects.create(name="a"), Cluster.objects.create(name="b")
    team = Group.objects.create(name="team")
    user.groups.add(team)
    grant(Role.VIEWER, user=user, cluster=cluster, namespace="ns-1")
    grant(Role.EDITOR, group=team, cluster=other)  # through a group, every namespace of one cluster
    grant(Role.ADMIN, group=Group.objects.create(name="not-a-member"), cluster=cluster)  # not theirs
    grant(Role.VIEWER, user=make_user("someone-else"))  # not theirs
    authenticated = _authenticated(key)
    with django_assert_num_queries(0):  # type: ignore[operator]
        rows = selectors.grant_rows(authenticated)
    assert sorted(rows, key=repr) == sorted(_queried(user), key=repr)
    assert len(rows) == 2


def test_a_user_without_grants_reads_an_empty_list(user_and_key: tuple[User, str]) -> None:
    user, key = user_and_key
    assert selectors.grant_rows(_authenticated(key)) == [] == _queried(user)


def _promote(found: NamespaceGrant) -> None:
    found.role = Role.ADMIN
    found.save()


CHANGES = {
    "grant-created": lambda user, cluster: grant(Role.ADMIN, user=user, cluster=cluster),
    "grant-changed": lambda user, cluster: _promote(NamespaceGrant.objects.get(user=user)),
    "grant-deleted": lambda user, cluster: NamespaceGrant.objects.get(user=user).delete(),
    "joined-a-group": lambda user, cluster: user.groups.add(
        grant(Role.EDITOR, group=Group.objects.create(name="new"), cluster=cluster).group
    ),
    "group-deleted": lambda user, cluster: Group.objects.filter(name="old").delete(),
}


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_after_a_change_in_this_process_the_request_reads_the_grants_again(
    user_and_key: tuple[User, str], change: object
) -> None:
    """A request that changes grants (the grants API, an OIDC sign-in) and then checks a role sees
    its own change: the copy read with the token is dropped at the first grant write."""
    user, key = user_and_key
    cluster = Cluster.objects.create(name="a")
    grant(Role.VIEWER, user=user, cluster=cluster, namespace="ns-1")
    old = Group.objects.create(name="old")
    user.groups.add(old)
    grant(Role.EDITOR, group=old, cluster=cluster, namespace="ns-2")
    authenticated = _authenticated(key)
    before = selectors.grant_rows(authenticated)
    change(user, cluster)  # type: ignore[operator]
    after = selectors.grant_rows(authenticated)
    assert sorted(after, key=repr) == sorted(_queried(user), key=repr)
    assert sorted(after, key=repr) != sorted(before, key=repr)

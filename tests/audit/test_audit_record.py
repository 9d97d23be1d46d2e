"""``audit_record`` takes the ``Actor``: whom an entry names for a user, a token and a component."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser

from apps.audit.actors import Actor
from apps.audit.services import audit_record
from apps.jobs.models import Cluster

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster() -> Cluster:
    return Cluster.objects.create(name="audited")


def test_a_user_acting_through_a_token_is_recorded_with_the_token_and_request(cluster: Cluster) -> None:
    user = get_user_model().objects.create_user("ana", password="x")
    actor = Actor(user=user, token_name="laptop", request_id="req-7")
    entry = audit_record(actor=actor, action="cluster.touch", obj=cluster, before={"a": 1}, after={"a": 2})
    entry.refresh_from_db()
    assert (entry.actor_id, entry.actor_name, entry.token_name, entry.request_id) == (
        user.pk,
        "ana",
        "laptop",
        "req-7",
    )
    assert (entry.object_type, entry.object_id, entry.before, entry.after) == (
        "jobs.cluster",
        str(cluster.pk),
        {"a": 1},
        {"a": 2},
    )


def test_a_component_is_recorded_by_its_system_name_without_a_user(cluster: Cluster) -> None:
    entry = audit_record(actor=Actor.system("adoption"), action="cluster.touch", obj=cluster)
    assert (entry.actor_id, entry.actor_name, entry.token_name, entry.request_id) == (
        None,
        "system:adoption",
        "",
        "",
    )


def test_an_anonymous_or_missing_user_is_recorded_as_system(cluster: Cluster) -> None:
    for actor in (Actor(), Actor(user=AnonymousUser())):
        entry = audit_record(actor=actor, action="cluster.touch", obj=cluster)
        assert (entry.actor_id, entry.actor_name) == (None, "system")


def test_a_given_name_wins_over_the_username(cluster: Cluster) -> None:
    user = get_user_model().objects.create_user("bo", password="x")
    entry = audit_record(actor=Actor(user=user, name="bo via admin"), action="cluster.touch", obj=cluster)
    assert (entry.actor_id, entry.actor_name) == (user.pk, "bo via admin")

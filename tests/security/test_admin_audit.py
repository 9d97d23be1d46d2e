"""Issue #16 item 9 (admin): changes made through the admin site to grants, webhooks, clusters and
tokens land in the app's audit log with who, what, before/after and our request id; secrets never."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from apps.accounts.models import NamespaceGrant
from apps.audit.models import AuditEntry
from apps.events.models import Webhook
from apps.jobs.models import Cluster

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client() -> Client:
    root = User.objects.create_superuser("root", password="pw")
    client = Client()
    client.force_login(root)
    return client


def _entries(object_type: str) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(object_type=object_type).order_by("id"))


def test_grant_added_changed_and_deleted_in_the_admin_are_audited(admin_client: Client) -> None:
    bob = User.objects.create_user("bob", password="pw")
    response = admin_client.post(
        "/admin/accounts/namespacegrant/add/",
        {"role": "viewer", "user": bob.pk, "namespace": "team-a"},
        HTTP_X_REQUEST_ID="client-chosen-id",
    )
    assert response.status_code == 302, response.content[:2000]
    grant = NamespaceGrant.objects.get(user=bob)
    admin_client.post(
        f"/admin/accounts/namespacegrant/{grant.pk}/change/",
        {"role": "admin", "user": bob.pk, "namespace": "team-a"},
    )
    admin_client.post(f"/admin/accounts/namespacegrant/{grant.pk}/delete/", {"post": "yes"})
    entries = _entries("accounts.namespacegrant")
    assert [e.action for e in entries] == [
        "namespacegrant.admin_create",
        "namespacegrant.admin_update",
        "namespacegrant.admin_delete",
    ]
    assert all(e.actor_name == "root" for e in entries)
    assert entries[0].before is None and entries[0].after["role"] == "viewer"
    assert entries[1].before["role"] == "viewer" and entries[1].after["role"] == "admin"
    assert entries[2].before["role"] == "admin" and entries[2].after is None
    assert all(e.request_id and e.request_id != "client-chosen-id" for e in entries)


def test_bulk_delete_from_the_admin_list_is_audited_per_object(admin_client: Client) -> None:
    clusters = [Cluster.objects.create(name=f"c{i}") for i in range(2)]
    response = admin_client.post(
        "/admin/jobs/cluster/",
        {"action": "delete_selected", "_selected_action": [c.pk for c in clusters], "post": "yes"},
    )
    assert response.status_code == 302
    deleted = {e.object_id for e in _entries("jobs.cluster") if e.action == "cluster.admin_delete"}
    assert deleted == {str(c.pk) for c in clusters}


def test_webhook_admin_changes_are_audited_without_the_secret(admin_client: Client, settings: Any) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True  # this test is about the audit, not the URL rules
    response = admin_client.post(
        "/admin/events/webhook/add/",
        {
            "name": "pager",
            "namespace": "*",
            "url": "https://hooks.example.com/x",
            "secret": "very-secret-hmac-key",
            "events": "[]",
            "active": "on",
        },
    )
    assert response.status_code == 302, response.content[:3000]
    entry = _entries("events.webhook")[-1]
    assert entry.action == "webhook.admin_create" and entry.after["url"] == "https://hooks.example.com/x"
    assert "very-secret-hmac-key" not in str(entry.after)
    assert Webhook.objects.count() == 1


# --- issue #24: users, groups, presets and jobs too ------------------------------------------------
def test_a_user_put_in_a_group_in_the_admin_is_audited_with_the_group(admin_client: Client) -> None:
    from django.contrib.auth.models import Group

    group = Group.objects.create(name="team-a-admins")
    added = admin_client.post(
        "/admin/auth/user/add/",
        {
            "username": "eve",
            "password1": "a-long-pass-phrase-1",
            "password2": "a-long-pass-phrase-1",
            "usable_password": "true",
        },
    )
    assert added.status_code == 302, added.content[:2000]
    eve = User.objects.get(username="eve")
    changed = admin_client.post(
        f"/admin/auth/user/{eve.pk}/change/",
        {
            "username": "eve",
            "is_active": "on",
            "groups": [group.pk],
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
        },
    )
    assert changed.status_code == 302, changed.content[:3000]
    entries = _entries("auth.user")
    assert [e.action for e in entries] == ["user.admin_create", "user.admin_update"]
    assert entries[1].before["groups"] == [] and entries[1].after["groups"] == [group.pk]
    assert all("a-long-pass-phrase-1" not in str(e.after) for e in entries)
    assert entries[0].after["password"] == "(set)"


def test_a_password_changed_in_the_admin_is_audited_without_it(admin_client: Client) -> None:
    bob = User.objects.create_user("bob", password="pw")
    response = admin_client.post(
        f"/admin/auth/user/{bob.pk}/password/",
        {
            "password1": "another-long-phrase-2",
            "password2": "another-long-phrase-2",
            "usable_password": "true",
        },
    )
    assert response.status_code == 302, response.content[:2000]
    (entry,) = _entries("auth.user")
    assert entry.action == "user.admin_password_change" and entry.after == {"password": "(changed)"}
    assert entry.actor_name == "root"


def test_group_and_job_changes_in_the_admin_are_audited(admin_client: Client) -> None:
    from apps.jobs.models import TrainingJob
    from tests.support.world import training_job

    assert admin_client.post("/admin/auth/group/add/", {"name": "sre"}).status_code == 302
    assert [e.action for e in _entries("auth.group")] == ["group.admin_create"]
    job = training_job(Cluster.objects.create(name="sim"), "llama")
    deleted = admin_client.post(f"/admin/jobs/trainingjob/{job.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302
    assert not TrainingJob.objects.filter(pk=job.pk).exists()
    (entry,) = _entries("jobs.trainingjob")
    assert entry.action == "trainingjob.admin_delete" and entry.before["name"] == "llama"


def test_the_preset_admin_validates_audits_and_keeps_builtins_read_only(admin_client: Client) -> None:
    from apps.policies.models import Preset

    # The data migration loads the built-ins; a transactional test before this one may have flushed them.
    builtin, _ = Preset.objects.get_or_create(
        name="retry-first",
        namespace="",
        cluster=None,
        defaults={"spec": {"strategies": ["retry"]}, "builtin": True},
    )
    spec_before = builtin.spec
    refused = admin_client.post(
        "/admin/policies/preset/add/", {"name": "bad", "namespace": "", "spec": '{"strategies": ["nope"]}'}
    )
    assert refused.status_code == 200 and b"/strategies/0" in refused.content  # the validator's field
    assert not Preset.objects.filter(name="bad").exists()
    ok = admin_client.post(
        "/admin/policies/preset/add/", {"name": "good", "namespace": "", "spec": '{"strategies": ["dump"]}'}
    )
    assert ok.status_code == 302, ok.content[:2000]
    assert [e.action for e in _entries("policies.preset")] == ["preset.admin_create"]
    changed = admin_client.post(
        f"/admin/policies/preset/{builtin.pk}/change/", {"name": "retry-first", "spec": '{"strategies": []}'}
    )
    assert changed.status_code == 403
    assert (
        admin_client.post(f"/admin/policies/preset/{builtin.pk}/delete/", {"post": "yes"}).status_code == 403
    )
    builtin.refresh_from_db()
    assert builtin.spec == spec_before

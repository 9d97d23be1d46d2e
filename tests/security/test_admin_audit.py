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

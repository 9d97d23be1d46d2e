"""Webhooks changed outside the admin site (the REST API): who may, create, update, delete, test.

Who may: a webhook reaches the jobs of its scope (one namespace or ``*``, of one cluster or of every
cluster), so reading or changing it takes the admin role over that whole scope: superusers for every
webhook; a namespace admin for the webhooks of the namespaces they administer (a grant on ``*`` of a
cluster covers that cluster's ``*`` webhooks; a grant without a cluster covers every cluster's).
Viewers and editors see no webhooks: a URL often carries the receiver's own key in its path.

Every change is audited in its transaction, as the admin site's are (``apps.audit.admin_hooks``),
with actions ``webhook.create`` / ``update`` / ``delete`` / ``test``; the secret only as set/changed.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from functools import partial
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from apps.accounts.models import ALL_NAMESPACES, Role
from apps.accounts.selectors import UserLike, grant_rows, role_from_grants
from apps.audit.actors import Actor
from apps.audit.admin_hooks import admin_snapshot
from apps.audit.services import audit_record
from apps.events.models import Webhook, WebhookDelivery
from apps.events.webhooks import delivery_enqueue, requeue_seconds
from apps.jobs.models import Cluster

SECRET_FIELDS = frozenset({"secret"})
TEST_KIND = "webhook.test"  # X-Event of a test message; not a Webhook.Kind, so no filter drops it
EDITABLE = ("name", "cluster", "namespace", "url", "secret", "events", "active")


def _superuser(user: UserLike) -> bool:
    return bool(user.is_authenticated and getattr(user, "is_superuser", False))


def _admin_grants(user: UserLike) -> set[tuple[int | None, str]]:
    return {(cluster_id, namespace) for cluster_id, namespace, role in grant_rows(user) if role == Role.ADMIN}


def webhooks_administered_by(user: UserLike) -> QuerySet[Webhook]:
    """The webhooks whose whole scope the user administers (all of them for superusers)."""
    hooks = Webhook.objects.select_related("cluster")
    if _superuser(user):
        return hooks
    covered = Q(pk__in=[])
    for cluster_id, namespace in _admin_grants(user):
        part = Q() if namespace == ALL_NAMESPACES else Q(namespace=namespace)
        if cluster_id is not None:
            part &= Q(cluster_id=cluster_id)
        if not part:  # admin of every namespace of every cluster
            return hooks
        covered |= part
    return hooks.filter(covered)


def webhook_may_manage(user: UserLike, *, cluster: Cluster | None, namespace: str) -> bool:
    """Whether the user administers the whole scope (``cluster`` None = every cluster)."""
    if _superuser(user):
        return True
    # cluster None: only grants without a cluster cover it; namespace "*": only "*" grants.
    cluster_id = cluster.pk if cluster is not None else None
    return role_from_grants(grant_rows(user), cluster_id=cluster_id, namespace=namespace) == Role.ADMIN


def webhook_snapshot(hook: Webhook) -> dict[str, Any]:
    """The webhook's columns as the audit trail records them (the secret only as set/empty)."""
    return admin_snapshot(hook, SECRET_FIELDS)


def _audit(actor: Actor, verb: str, hook: Webhook, before: Any, after: Any) -> None:
    audit_record(actor=actor, action=f"webhook.{verb}", obj=hook, before=before, after=after)


def webhook_create(*, actor: Actor, values: dict[str, Any]) -> Webhook:
    """A new webhook from checked ``values`` (the fields of ``EDITABLE``), audited."""
    with transaction.atomic():
        hook = Webhook.objects.create(**{name: values[name] for name in EDITABLE if name in values})
        _audit(actor, "create", hook, None, webhook_snapshot(hook))
    return hook


def webhook_update(*, hook: Webhook, actor: Actor, values: dict[str, Any]) -> Webhook:
    """Change the given fields of ``hook`` (checked values), audited; a new secret as "(changed)".
    No field given: nothing is written, nothing audited."""
    given = [name for name in EDITABLE if name in values]
    if not given:
        return hook
    with transaction.atomic():
        before = webhook_snapshot(hook)
        old_secret = hook.secret
        for name in given:
            setattr(hook, name, values[name])
        hook.save(update_fields=given)  # only these columns: a concurrent change to another is kept
        after = webhook_snapshot(hook)
        if hook.secret != old_secret:
            after["secret"] = "(changed)"
        _audit(actor, "update", hook, before, after)
    return hook


def webhook_delete(*, hook: Webhook, actor: Actor) -> None:
    """Delete ``hook`` and its deliveries, audited."""
    with transaction.atomic():
        before = webhook_snapshot(hook)
        pk = hook.pk
        hook.delete()
        hook.pk = pk  # Django clears it on delete; the entry names what was deleted
        _audit(actor, "delete", hook, before, None)


def webhook_test(*, hook: Webhook, actor: Actor) -> WebhookDelivery:
    """Write a ``webhook.test`` delivery to ``hook`` and queue it after commit: the same outbox row,
    task, signature, retries and sweep as every other message (``apps.events.webhooks``)."""
    now = timezone.now()
    body = {
        "kind": TEST_KIND,
        "webhook": {"id": hook.pk, "name": hook.name},
        "requested_by": actor.display_name,
        "sent_at": now.isoformat(),
    }
    with transaction.atomic():
        delivery = WebhookDelivery.objects.create(
            webhook=hook,
            delivery_id=uuid.uuid4(),
            kind=TEST_KIND,
            payload=json.loads(json.dumps(body, cls=DjangoJSONEncoder)),
            requeue_after=now + timedelta(seconds=requeue_seconds()),
        )
        _audit(actor, "test", hook, None, {"delivery_id": str(delivery.delivery_id)})
        transaction.on_commit(partial(delivery_enqueue, delivery.pk))
    return delivery

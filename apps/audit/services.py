"""Writing audit entries. Call inside the transaction of the change being recorded."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import models

from apps.audit.models import AuditEntry


def audit_record(
    *,
    actor: User | AnonymousUser | None,
    action: str,
    obj: models.Model,
    before: Any = None,
    after: Any = None,
    actor_name: str = "",
    token_name: str = "",
    request_id: str = "",
) -> AuditEntry:
    """Append one audit entry for ``action`` on ``obj``; ``actor=None`` means a system component."""
    user = actor if isinstance(actor, User) and actor.is_authenticated else None
    name = actor_name or (user.get_username() if user is not None else "system")
    return AuditEntry.objects.create(
        actor=user,
        actor_name=name[:150],
        token_name=token_name[:100],
        action=action,
        object_type=obj._meta.label_lower,
        object_id=str(obj.pk),
        object_repr=str(obj)[:300],
        before=before,
        after=after,
        request_id=request_id[:64],
    )

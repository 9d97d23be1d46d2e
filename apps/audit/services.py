"""Writing audit entries. Call inside the transaction of the change being recorded."""

from __future__ import annotations

from typing import Any

from django.db import models

from apps.audit.actors import Actor
from apps.audit.models import AuditEntry


def audit_record(
    *,
    actor: Actor,
    action: str,
    obj: models.Model,
    before: Any = None,
    after: Any = None,
) -> AuditEntry:
    """Append one audit entry for ``action`` on ``obj``; a component acts as ``Actor.system(name)``."""
    return AuditEntry.objects.create(
        actor=actor.account,
        actor_name=actor.display_name[:150],
        token_name=actor.token_name[:100],
        action=action,
        object_type=obj._meta.label_lower,
        object_id=str(obj.pk),
        object_repr=str(obj)[:300],
        before=before,
        after=after,
        request_id=actor.request_id[:64],
    )

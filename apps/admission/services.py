"""Writes on namespace default policies: validated, versioned, audited (design §4.5)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from apps.admission.models import NamespaceDefault, NamespaceDefaultRevision
from apps.audit.actors import Actor
from apps.audit.services import audit_record
from apps.core.errors import ValidationFailed
from apps.jobs.models import Cluster
from apps.policies.validation import validate_policy


def default_for(cluster: Cluster, namespace: str) -> NamespaceDefault | None:
    return (
        NamespaceDefault.objects.select_related("current_revision")
        .filter(cluster=cluster, namespace=namespace)
        .first()
    )


def _append_revision(
    default: NamespaceDefault, *, spec: dict[str, Any] | None, preset_name: str, comment: str, actor: Actor
) -> None:
    """The next numbered revision made current (``spec=None`` records the removal), and its audit entry."""
    before = default.current_revision.spec if default.current_revision else None
    last = default.revisions.order_by("-number").values_list("number", flat=True).first() or 0
    revision = NamespaceDefaultRevision.objects.create(
        default=default,
        number=last + 1,
        spec=spec,
        preset_name=preset_name,
        author=actor.account,
        author_name=actor.display_name,
        comment=comment[:500],
    )
    default.current_revision = revision if spec is not None else None
    default.save(update_fields=["current_revision", "updated_at"])
    action = "namespace_default.update" if spec is not None else "namespace_default.delete"
    audit_record(actor=actor, action=action, obj=default, before=before, after=spec)


@transaction.atomic
def namespace_default_set(
    *,
    cluster: Cluster,
    namespace: str,
    spec: Any,
    actor: Actor,
    preset_name: str = "",
    comment: str = "",
) -> NamespaceDefault:
    """Validate ``spec`` (no job context: it must hold for any job) and make it the namespace default."""
    result = validate_policy(spec)
    if not result.ok or result.spec is None:
        raise ValidationFailed(result.errors, warnings=result.warnings)
    default, _ = (
        NamespaceDefault.objects.select_for_update()
        .order_by()
        .get_or_create(cluster=cluster, namespace=namespace)
    )
    _append_revision(
        default, spec=result.spec.to_dict(), preset_name=preset_name, comment=comment, actor=actor
    )
    return default


@transaction.atomic
def namespace_default_delete(
    *, default: NamespaceDefault, actor: Actor, comment: str = ""
) -> NamespaceDefault:
    """Stop giving new jobs a default; the history stays (a null-spec revision marks the removal)."""
    default = (
        NamespaceDefault.objects.select_for_update(of=("self",))
        .select_related("current_revision")
        .get(pk=default.pk)
    )
    _append_revision(default, spec=None, preset_name="", comment=comment or "default removed", actor=actor)
    return default

"""Presets: create, update, delete and resolve. Validated like any policy, audited, built-ins read-only.

A preset is global (the built-ins, and those a superuser adds) or belongs to one namespace of one
cluster, whose editors manage it. A name is resolved where the job lives: the namespace's own
preset first, then the global one, so no namespace can change what another's jobs get.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet

from apps.accounts.models import Role
from apps.accounts.selectors import has_role, role_in_namespace
from apps.audit.actors import Actor
from apps.audit.services import audit_record
from apps.core.errors import ApplicationError, ValidationFailed
from apps.jobs.models import Cluster
from apps.policies.builtin_presets import builtin_preset
from apps.policies.models import Preset
from apps.policies.validation import validate_policy


class PresetReadOnly(ApplicationError):
    """Built-in presets ship with the product and are restored on migrate, so edits would not stick."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"{name!r} is a built-in preset and cannot be changed or deleted; "
            "create a copy under another name."
        )


class PresetForbidden(ApplicationError):
    """Who may change a preset: its namespace's editors, or for a global one a superuser only."""

    def __init__(self, preset: Preset) -> None:
        if preset.is_global:
            detail = (
                f"{preset.name!r} is a global preset: every namespace may use it, so only a superuser "
                "may change or delete it; create a preset in your namespace instead."
            )
        else:
            detail = f"Changing presets of namespace {preset.namespace!r} needs the editor role there."
        super().__init__(detail)


def preset_may_change(preset: Preset, user: Any) -> bool:
    """A namespace preset: its namespace's editors (and admins). A global one: superusers only, as it
    reaches every namespace (a legacy global preset's author is not enough any more)."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    if user.is_superuser:
        return True
    if preset.is_global or preset.cluster is None:
        return False
    role = role_in_namespace(user, cluster=preset.cluster, namespace=preset.namespace)
    return has_role(role, Role.EDITOR)


def preset_may_create(user: Any, *, cluster: Cluster | None, namespace: str) -> bool:
    """Editors of ``namespace`` of ``cluster`` may add presets there; global ones are superusers'."""
    probe = Preset(name="-", cluster=cluster, namespace=namespace)
    return preset_may_change(probe, user)


def _check_may_change(preset: Preset, actor: Actor) -> None:
    if preset.builtin:
        raise PresetReadOnly(preset.name)
    if not preset_may_change(preset, actor.user):
        raise PresetForbidden(preset)


class PresetExists(ApplicationError):
    def __init__(self, name: str, namespace: str = "") -> None:
        where = f" in namespace {namespace!r}" if namespace else " among the global presets"
        super().__init__(f"a preset named {name!r} already exists{where}")


def _validated(spec: Any) -> dict[str, Any]:
    """The spec as given, once the validator accepts it (kept release-agnostic when no release is named)."""
    result = validate_policy(spec)
    if not result.ok:
        raise ValidationFailed(result.errors, warnings=result.warnings)
    return dict(spec)


def preset_snapshot(preset: Preset) -> dict[str, Any]:
    return {
        "name": preset.name,
        "cluster": preset.cluster.name if preset.cluster is not None else None,
        "namespace": preset.namespace,
        "description": preset.description,
        "spec": preset.spec,
        "builtin": preset.builtin,
    }


def _audit(actor: Actor, action: str, preset: Preset, before: Any, after: Any) -> None:
    audit_record(actor=actor, action=action, obj=preset, before=before, after=after)


def _scoped(cluster: Cluster | None, namespace: str) -> QuerySet[Preset]:
    return Preset.objects.filter(cluster=cluster if namespace else None, namespace=namespace)


@transaction.atomic
def preset_create(
    *,
    name: str,
    description: str,
    spec: Any,
    actor: Actor,
    cluster: Cluster | None = None,
    namespace: str = "",
) -> Preset:
    """Store a new preset in ``namespace`` of ``cluster``, or a global one (superusers only)."""
    if bool(namespace) != (cluster is not None):
        raise ApplicationError("A namespace preset names both its cluster and its namespace.")
    if not preset_may_create(actor.user, cluster=cluster, namespace=namespace):
        raise PresetForbidden(Preset(name=name, cluster=cluster, namespace=namespace))
    clean = _validated(spec)
    if _scoped(cluster, namespace).select_for_update().filter(name=name).exists():
        raise PresetExists(name, namespace)
    preset = Preset.objects.create(
        name=name,
        cluster=cluster,
        namespace=namespace,
        description=description,
        spec=clean,
        created_by=actor.account,
    )
    _audit(actor, "preset.create", preset, None, preset_snapshot(preset))
    return preset


@transaction.atomic
def preset_update(*, preset: Preset, description: str, spec: Any, actor: Actor) -> Preset:
    """Replace a preset's description and spec (its namespace's editors; a global one: superusers)."""
    _check_may_change(preset, actor)
    clean = _validated(spec)
    before = preset_snapshot(preset)
    preset.description = description
    preset.spec = clean
    preset.save(update_fields=["description", "spec", "updated_at"])
    _audit(actor, "preset.update", preset, before, preset_snapshot(preset))
    return preset


@transaction.atomic
def preset_delete(*, preset: Preset, actor: Actor) -> None:
    """Delete a preset (who may change it may); revisions keep their copy of the spec."""
    _check_may_change(preset, actor)
    _audit(actor, "preset.delete", preset, preset_snapshot(preset), None)
    preset.delete()


def preset_resolve(name: str, *, cluster: Cluster | None, namespace: str) -> Preset | None:
    """The preset ``name`` means in ``namespace`` of ``cluster``: its own, else the global one.

    ``cluster=None`` (a stateless tool with no job) sees the global presets only.
    """
    scope = Q(namespace="")
    if cluster is not None and namespace:
        scope |= Q(cluster=cluster, namespace=namespace)
    found = list(Preset.objects.filter(scope, name=name).select_related("cluster"))
    found.sort(key=lambda preset: preset.is_global)  # the namespace's own first
    return found[0] if found else None


def preset_spec_resolve(name: str, *, cluster: Cluster | None, namespace: str) -> dict[str, Any] | None:
    """The spec ``name`` means there (``preset_resolve``), else the shipped built-in of that name
    (a database whose built-ins were never synced still knows them), else None."""
    preset = preset_resolve(name, cluster=cluster, namespace=namespace)
    if preset is not None:
        return dict(preset.spec)
    return builtin_preset(name)

"""Writes on presets: create, update, delete. Validated like any policy, audited, built-ins read-only."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from apps.audit.actors import Actor
from apps.audit.services import audit_record
from apps.core.errors import ApplicationError, ValidationFailed
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
    """Presets are global: a namespace role says nothing about someone else's template."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"Only the author of preset {name!r} or a superuser may change or delete it; "
            "create your own copy under another name."
        )


def preset_may_change(preset: Preset, user: Any) -> bool:
    """The author or a superuser. A namespace admin is not enough: every namespace uses presets."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    return bool(user.is_superuser) or (preset.created_by_id is not None and preset.created_by_id == user.pk)


def _check_may_change(preset: Preset, actor: Actor) -> None:
    if preset.builtin:
        raise PresetReadOnly(preset.name)
    if not preset_may_change(preset, actor.user):
        raise PresetForbidden(preset.name)


class PresetExists(ApplicationError):
    def __init__(self, name: str) -> None:
        super().__init__(f"a preset named {name!r} already exists")


def _validated(spec: Any) -> dict[str, Any]:
    """The spec as given, once the validator accepts it (kept release-agnostic when no release is named)."""
    result = validate_policy(spec)
    if not result.ok:
        raise ValidationFailed(result.errors, warnings=result.warnings)
    return dict(spec)


def preset_snapshot(preset: Preset) -> dict[str, Any]:
    return {
        "name": preset.name,
        "description": preset.description,
        "spec": preset.spec,
        "builtin": preset.builtin,
    }


def _audit(actor: Actor, action: str, preset: Preset, before: Any, after: Any) -> None:
    audit_record(actor=actor, action=action, obj=preset, before=before, after=after)


@transaction.atomic
def preset_create(*, name: str, description: str, spec: Any, actor: Actor) -> Preset:
    """Store a new user preset."""
    clean = _validated(spec)
    if Preset.objects.select_for_update().filter(name=name).exists():
        raise PresetExists(name)
    preset = Preset.objects.create(name=name, description=description, spec=clean, created_by=actor.account)
    _audit(actor, "preset.create", preset, None, preset_snapshot(preset))
    return preset


@transaction.atomic
def preset_update(*, preset: Preset, description: str, spec: Any, actor: Actor) -> Preset:
    """Replace a user preset's description and spec (its author or a superuser)."""
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
    """Delete a user preset (its author or a superuser); revisions keep their copy of the spec."""
    _check_may_change(preset, actor)
    _audit(actor, "preset.delete", preset, preset_snapshot(preset), None)
    preset.delete()

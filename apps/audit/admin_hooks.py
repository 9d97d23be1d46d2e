"""The admin site writes to the app's audit log too (issue #16): grants, webhooks, clusters, tokens.

``AuditedAdmin`` records every add, change and delete made through the admin (single and bulk),
in the same transaction, with the signed-in user, the fields before and after, and our request id.
Actions are ``<model>.admin_create`` / ``admin_update`` / ``admin_delete``, so the audit log tells
admin-site changes apart from API ones. Secret fields are recorded only as set / empty.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from django.contrib import admin
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models, transaction
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.audit.actors import Actor
from apps.audit.services import audit_record
from apps.core.middleware import request_id_of


def admin_snapshot(obj: models.Model, secret_fields: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The object's own columns as JSON (foreign keys as ids) and its many-to-many links as sorted
    ids (a user's groups decide their grants); secrets only as "(set)" / "(empty)"."""
    values: dict[str, Any] = {}
    for field in obj._meta.concrete_fields:
        value = getattr(obj, field.attname)
        if field.name in secret_fields:
            value = "(set)" if value else "(empty)"
        values[field.attname] = value
    if obj.pk is not None:
        for m2m in obj._meta.many_to_many:
            values[m2m.name] = sorted(getattr(obj, m2m.name).values_list("pk", flat=True))
    return json.loads(json.dumps(values, cls=DjangoJSONEncoder))


def _secrets_of(obj: models.Model, secret_fields: frozenset[str]) -> dict[str, Any]:
    return {name: getattr(obj, name, None) for name in secret_fields}


class AuditedAdmin(admin.ModelAdmin):
    """A ``ModelAdmin`` whose writes are audited like the API's.

    An add or change is recorded once its many-to-many links are saved too (``save_related`` runs
    after ``save_model`` in the admin's one transaction), so the "after" shows the groups a user was
    put in. A secret that changed is recorded as "(changed)", never its value.
    """

    audit_secret_fields: ClassVar[frozenset[str]] = frozenset()

    def _audit(self, request: HttpRequest, verb: str, obj: models.Model, before: Any, after: Any) -> None:
        audit_record(
            actor=Actor(user=request.user, request_id=request_id_of(request)),
            action=f"{obj._meta.model_name}.admin_{verb}",
            obj=obj,
            before=before,
            after=after,
        )

    def _stored(self, obj: models.Model) -> models.Model | None:
        if obj.pk is None:
            return None
        return type(obj)._default_manager.filter(pk=obj.pk).first()

    @staticmethod
    def _pending(request: HttpRequest) -> dict[int, tuple[bool, Any, dict[str, Any]]]:
        """Per request (admin instances are shared by threads): what ``save_model`` saw before the
        save, keyed by the object, until ``save_related`` records the entry."""
        pending: dict[int, tuple[bool, Any, dict[str, Any]]] = request.__dict__.setdefault(
            "_audit_pending", {}
        )
        return pending

    def save_model(self, request: HttpRequest, obj: models.Model, form: Any, change: bool) -> None:
        stored = self._stored(obj) if change else None
        before = admin_snapshot(stored, self.audit_secret_fields) if stored is not None else None
        secrets = _secrets_of(stored, self.audit_secret_fields) if stored is not None else {}
        super().save_model(request, obj, form, change)
        self._pending(request)[id(obj)] = (change, before, secrets)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        obj = form.instance
        change, before, secrets = self._pending(request).pop(id(obj), (change, None, {}))
        after = admin_snapshot(obj, self.audit_secret_fields)
        for name, old in secrets.items():
            if old != getattr(obj, name, None):
                after[name] = "(changed)"
        self._audit(request, "update" if change else "create", obj, before, after)

    def delete_model(self, request: HttpRequest, obj: models.Model) -> None:
        with transaction.atomic():
            before = admin_snapshot(obj, self.audit_secret_fields)
            pk = obj.pk
            super().delete_model(request, obj)
            obj.pk = pk  # Django clears it on delete; the entry names what was deleted
            self._audit(request, "delete", obj, before, None)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        with transaction.atomic():
            doomed = list(queryset)
            snapshots = [(obj, obj.pk, admin_snapshot(obj, self.audit_secret_fields)) for obj in doomed]
            super().delete_queryset(request, queryset)
            for obj, pk, before in snapshots:
                obj.pk = pk
                self._audit(request, "delete", obj, before, None)

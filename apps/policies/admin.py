from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from apps.audit.admin_hooks import AuditedAdmin
from apps.policies.models import PolicyRevision, Preset
from apps.policies.validation import validate_policy


class PresetAdminForm(forms.ModelForm):
    """The admin's preset form checks the spec with the one validator every other path uses."""

    class Meta:
        model = Preset
        fields = ("name", "cluster", "namespace", "description", "spec")

    def clean_spec(self) -> Any:
        spec = self.cleaned_data.get("spec")
        result = validate_policy(spec)
        if not result.ok:
            raise forms.ValidationError(
                [f"{issue.field or 'spec'}: {issue.message}" for issue in result.errors], code="invalid"
            )
        return spec

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if bool(cleaned.get("cluster")) != bool(cleaned.get("namespace")):
            raise forms.ValidationError(
                "A namespace preset names both its cluster and its namespace; a global one neither."
            )
        return cleaned


@admin.register(Preset)
class PresetAdmin(AuditedAdmin):
    """Audited; built-ins (shipped, restored on migrate) are read-only here as in the API."""

    form = PresetAdminForm
    list_display = ("name", "cluster", "namespace", "description", "builtin", "updated_at")
    list_filter = ("builtin", "cluster")
    search_fields = ("name", "namespace", "description")

    def has_change_permission(self, request: HttpRequest, obj: Preset | None = None) -> bool:
        if obj is not None and obj.builtin:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Preset | None = None) -> bool:
        if obj is not None and obj.builtin:
            return False
        return super().has_delete_permission(request, obj)

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).select_related("cluster")

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        # The list's bulk delete skips has_delete_permission per object: built-ins stay.
        super().delete_queryset(request, queryset.filter(builtin=False))

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


@admin.register(PolicyRevision)
class PolicyRevisionAdmin(admin.ModelAdmin):
    list_display = ("job", "number", "source", "author_name", "created_at", "comment")
    list_filter = ("source",)
    search_fields = ("job__name", "comment", "author_name")
    raw_id_fields = ("job", "author", "source_preset")

    # Revisions are immutable: new ones come from the form, the API or a restore.
    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

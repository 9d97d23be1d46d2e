"""``GET /audit/``: who changed what, when, with before/after; for administrators."""

from __future__ import annotations

from typing import Any

import django_filters
from drf_spectacular.utils import extend_schema
from rest_framework import generics

from apps.accounts.permissions import IsAdminSomewhere
from apps.accounts.selectors import audit_visible_to
from apps.api.audit.serializers import AuditEntryOutputSerializer
from apps.audit.models import AuditEntry


class AuditFilter(django_filters.FilterSet):
    action = django_filters.CharFilter(max_length=64, help_text="e.g. policy.update")
    object_type = django_filters.CharFilter(max_length=64, help_text="e.g. jobs.trainingjob")
    object_id = django_filters.CharFilter(max_length=64)
    actor = django_filters.CharFilter(field_name="actor_name", max_length=150)
    request_id = django_filters.CharFilter(max_length=64)

    class Meta:
        model = AuditEntry
        fields: list[str] = []


@extend_schema(
    tags=["audit"], summary="Audit trail (superusers, and admins for the namespaces they administer)"
)
class AuditListApi(generics.ListAPIView):
    serializer_class = AuditEntryOutputSerializer
    permission_classes = [IsAdminSomewhere]
    filterset_class = AuditFilter

    def get_queryset(self) -> Any:
        return audit_visible_to(self.request.user).order_by("-created_at", "-id")

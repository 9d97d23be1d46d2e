from __future__ import annotations

from rest_framework import serializers

from apps.audit.models import AuditEntry


class AuditEntryOutputSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_name")
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)

    class Meta:
        model = AuditEntry
        fields = [
            "id",
            "created_at",
            "actor",
            "token_name",
            "action",
            "object_type",
            "object_id",
            "object_repr",
            "before",
            "after",
            "request_id",
        ]

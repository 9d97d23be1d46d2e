"""Input and output shapes of the namespace-default and recreate endpoints."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.api.policies.serializers import PolicySpecField, PolicySpecSerializer
from apps.core.api_errors import ErrorSerializer
from apps.core.api_inputs import StrictInputSerializer, require_exactly_one

MAX_COMMENT = 500


class DefaultPolicyPutSerializer(StrictInputSerializer):
    """``PUT .../default-policy/``: the same body as a job's policy (a spec or a preset)."""

    spec = PolicySpecField(required=False, help_text="The policy; give this or preset")
    preset = serializers.SlugField(max_length=63, required=False, help_text="Take the spec from this preset")
    comment = serializers.CharField(max_length=MAX_COMMENT, required=False, allow_blank=True, default="")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        require_exactly_one(attrs, "spec", "preset")
        return attrs


class DefaultPolicyOutputSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    namespace = serializers.CharField()
    revision = serializers.IntegerField(allow_null=True, help_text="Revision in force; null = no default")
    spec = PolicySpecSerializer(allow_null=True)
    preset = serializers.CharField(allow_blank=True, help_text="Preset the spec was taken from, if any")
    comment = serializers.CharField(allow_blank=True)
    author = serializers.CharField(allow_blank=True)
    updated_at = serializers.DateTimeField(allow_null=True)
    warnings = ErrorSerializer(many=True)


class DefaultRevisionOutputSerializer(serializers.Serializer):
    number = serializers.IntegerField(min_value=1)
    spec = PolicySpecSerializer(allow_null=True, help_text="null: the default was removed")
    preset = serializers.CharField(source="preset_name", allow_blank=True)
    author = serializers.CharField(source="author_name", allow_blank=True)
    comment = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()


class RecreateInputSerializer(StrictInputSerializer):
    confirm = serializers.CharField(max_length=253, help_text="The job's name, typed to confirm")
    revision = serializers.IntegerField(
        min_value=1,
        max_value=2**31 - 1,
        required=False,
        help_text="Revision to merge; default the current one",
    )


class RecreateStepSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    state = serializers.CharField()
    step = serializers.CharField()
    error = serializers.CharField(required=False)
    uid = serializers.CharField(required=False)


class RecreateOutputSerializer(serializers.Serializer):
    """A recreate operation: ``202`` when queued, then read at ``status_url`` until it has finished."""

    id = serializers.IntegerField(source="pk")
    job = serializers.IntegerField(source="job_id")
    revision = serializers.IntegerField()
    state = serializers.ChoiceField(
        choices=["pending", "deleting", "creating", "rolling_back", "done", "rolled_back", "failed"],
        help_text="done: created with the revision; rolled_back: the cluster refused the new manifest "
        "and the job as it was is back; failed: another job took the name",
    )
    finished = serializers.SerializerMethodField()
    old_uid = serializers.CharField()
    new_uid = serializers.CharField(allow_blank=True, help_text="empty until the job is created")
    attempts = serializers.IntegerField(help_text="create attempts so far")
    last_error = serializers.CharField(allow_blank=True)
    steps = RecreateStepSerializer(many=True)
    status_url = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)

    def get_finished(self, operation: Any) -> bool:
        return operation.state not in operation.ACTIVE

    def get_status_url(self, operation: Any) -> str:
        return f"/api/v1/jobs/{operation.job_id}/recreates/{operation.pk}/"

"""Request and response bodies of the policy endpoints, described precisely for the OpenAPI schema.

Policy specs are validated by ``validate_policy`` (not by these serializers), so the form, the API and
the command report identical issues; the spec serializers here only document the shape.
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.api_errors import ErrorSerializer
from apps.core.api_inputs import StrictInputSerializer, require_exactly_one
from apps.core.api_output import api_datetime
from apps.core.parsers import json_safety_problem
from apps.policies.models import PolicyRevision, PolicySync, Preset
from apps.policies.rendering.when import WAITS_FOR, WHENS
from apps.policies.spec import (
    BOUNDS,
    DECISION_ACTIONS,
    DEFAULT_RELEASE,
    FAULT_SCHEDULING_VALUES,
    PLATFORM_STRATEGIES,
    RELEASES,
    STRATEGIES,
    SUB_HEALTHY_VALUES,
)

MAX_COMMENT = 500


def _bounded(name: str, **kwargs: Any) -> serializers.IntegerField:
    low, high = BOUNDS[name]
    return serializers.IntegerField(min_value=low, max_value=high, **kwargs)


class DecisionRuleSerializer(serializers.Serializer):
    match = serializers.DictField(
        child=serializers.JSONField(),
        help_text="fault_type, fault_level, min_ranks, max_ranks, rank0, repeat_within_s, min_repeats",
    )
    strategy = serializers.ChoiceField(choices=list(DECISION_ACTIONS))


class PolicySpecSerializer(serializers.Serializer):
    """A recovery policy (design.md §4.1); missing fields take their defaults."""

    mindcluster_version = serializers.ChoiceField(choices=list(RELEASES), default=DEFAULT_RELEASE)
    strategies = serializers.ListField(child=serializers.ChoiceField(choices=list(STRATEGIES)), default=list)
    fault_scheduling = serializers.ChoiceField(choices=list(FAULT_SCHEDULING_VALUES), default="grace")
    pod_rescheduling = serializers.BooleanField(default=False)
    fault_retry_times = _bounded("fault_retry_times", default=0)
    backoff_limit = _bounded("backoff_limit", allow_null=True, default=None)
    max_restarts = _bounded("max_restarts", default=32_767)
    monitor_interval = _bounded("monitor_interval", default=30)
    wait_reschedule_timeout = _bounded("wait_reschedule_timeout", default=270)
    sub_healthy_strategy = serializers.ChoiceField(choices=list(SUB_HEALTHY_VALUES), default="ignore")
    ttp_port = _bounded("ttp_port", default=8_000)
    platform_mode = serializers.BooleanField(default=False)
    decision_rules = DecisionRuleSerializer(many=True, default=list)
    default_strategy = serializers.ChoiceField(choices=list(PLATFORM_STRATEGIES), default="recover")
    decision_timeout_s = _bounded("decision_timeout_s", default=240)


@extend_schema_field(PolicySpecSerializer)
class PolicySpecField(serializers.JSONField):
    """Any JSON accepted on the wire; ``validate_policy`` decides, so every interface gives the same issues.

    Only what the database could not store (NUL characters) is refused here.
    """

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        problem = json_safety_problem(value)
        if problem:
            raise serializers.ValidationError(f"The policy cannot be stored: {problem}.", code="invalid")
        return value


@extend_schema_field(OpenApiTypes.ANY)
class AnyJsonField(serializers.JSONField):
    """Free-form JSON (validation results are data, not a 400)."""


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "object", "additionalProperties": True}]})
class ManifestField(serializers.JSONField):
    """An AscendJob as YAML/JSON text (one or more documents) or as a JSON object."""


class SyncOutputSerializer(serializers.ModelSerializer):
    """A push of one revision to the cluster (the outbox row of the push pipeline)."""

    revision = serializers.IntegerField(
        source="generation", help_text="The revision number this push applies"
    )
    # Declared rather than derived: derived bounds of positive-integer columns differ between database
    # backends, and the committed schema must not depend on where it was generated.
    attempts = serializers.IntegerField(min_value=0)
    duration_ms = serializers.FloatField(allow_null=True, read_only=True)

    class Meta:
        model = PolicySync
        fields = [
            "id",
            "revision",
            "state",
            "attempts",
            "last_error",
            "retryable",
            "applied_resource_versions",
            "drift",
            "effects",
            "queued_at",
            "started_at",
            "finished_at",
            "checked_at",
            "duration_ms",
        ]


class PendingSerializer(serializers.Serializer):
    revision = serializers.IntegerField(min_value=1)
    keys = serializers.ListField(child=serializers.CharField())
    waits_for = serializers.ChoiceField(
        choices=list(WAITS_FOR), help_text="nothing: read at every fault, in effect once written"
    )
    written = serializers.BooleanField(help_text="Whether the push of this revision has written it")


class ProcessRecoverySerializer(serializers.Serializer):
    on = serializers.BooleanField()
    reason = serializers.CharField(allow_blank=True)


class InEffectSerializer(serializers.Serializer):
    """What the job actually runs with (design.md §4.4), read from what it was created with."""

    revision = serializers.IntegerField(
        allow_null=True, help_text="The revision whose creation-time keys the cluster runs with"
    )
    since = serializers.DateTimeField(allow_null=True)
    basis = serializers.ChoiceField(choices=["created-with", "admission", "observed", "unknown"])
    pending = PendingSerializer(many=True)
    config = serializers.DictField(
        child=AnyJsonField(), allow_null=True, help_text="The creation-time config as observed"
    )
    observed_from = serializers.ChoiceField(
        choices=["clusterd-init", "podgroup-at-creation", "podgroup-before-first-push"], allow_null=True
    )
    process_recovery = ProcessRecoverySerializer(allow_null=True)
    notes = serializers.ListField(child=serializers.CharField())


def in_effect_output(view: dict[str, Any]) -> dict[str, Any]:
    """``InEffectSerializer(view).data`` for the dict ``apps.policies.in_effect.in_effect`` returns."""
    names = InEffectSerializer._declared_fields
    pending = [
        {name: entry[name] for name in PendingSerializer._declared_fields} for entry in view["pending"]
    ]
    recovery = view["process_recovery"]
    return {
        **{name: view[name] for name in names},
        "since": api_datetime(view["since"]),
        "pending": pending,
        "process_recovery": None
        if recovery is None
        else {"on": bool(recovery["on"]), "reason": str(recovery["reason"])},
    }


# The fields rendered as DRF datetimes (here and by the database, apps/api/policies/bodies.py).
SYNC_DATETIMES = ("queued_at", "started_at", "finished_at", "checked_at")


def sync_output(sync: PolicySync) -> dict[str, Any]:
    """``SyncOutputSerializer(sync).data``, without building a ModelSerializer per request."""
    out = {name: getattr(sync, name) for name in SyncOutputSerializer.Meta.fields if name != "revision"}
    out["revision"] = sync.generation
    for name in SYNC_DATETIMES:
        out[name] = api_datetime(out[name])
    return {name: out[name] for name in SyncOutputSerializer.Meta.fields}


class PolicyOutputSerializer(serializers.Serializer):
    """The current policy of a job."""

    job = serializers.IntegerField()
    revision = serializers.IntegerField(
        allow_null=True, help_text="Current revision number; null = no policy yet"
    )
    spec = PolicySpecSerializer(allow_null=True)
    # A field named like a Serializer attribute: DRF's metaclass takes it off the class; the stubs don't.
    source = serializers.ChoiceField(choices=PolicyRevision.Source.choices, allow_null=True)  # type: ignore[assignment]
    comment = serializers.CharField(allow_blank=True)
    author = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField(allow_null=True)
    warnings = ErrorSerializer(many=True)
    sync = SyncOutputSerializer(
        allow_null=True, help_text="The latest push: what was written, not what is in effect"
    )
    in_effect = InEffectSerializer()


class PolicyPutInputSerializer(StrictInputSerializer):
    """``PUT /jobs/{id}/policy/``: a new spec (or a preset), guarded by ``If-Match`` or ``revision``."""

    spec = PolicySpecField(required=False, help_text="The policy; give this or preset")
    preset = serializers.SlugField(max_length=63, required=False, help_text="Start from this preset instead")
    comment = serializers.CharField(max_length=MAX_COMMENT, required=False, allow_blank=True, default="")
    revision = serializers.IntegerField(
        min_value=0,
        max_value=2**31 - 1,
        required=False,
        help_text="The revision this change is based on (0 = none yet); 409 when it is not current",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        require_exactly_one(attrs, "spec", "preset")
        return attrs


class PreviewInputSerializer(StrictInputSerializer):
    spec = PolicySpecField(required=False, help_text="A draft policy; omit to preview the current revision")


class LiveSerializer(serializers.Serializer):
    available = serializers.BooleanField(help_text="Whether the live AscendJob could be read")
    reason = serializers.ChoiceField(choices=["not_found", "unreachable"], required=False)
    message = serializers.CharField(required=False)
    resource_version = serializers.CharField(required=False)
    podgroup = serializers.CharField(required=False)


class EffectSerializer(serializers.Serializer):
    target = serializers.CharField()
    when = serializers.ChoiceField(
        choices=list(WHENS),
        help_text="live: read at every fault; recreate: read once when the job is created (waits for a "
        "recreation on a running job); pod-restart; image-build; training-start",
    )
    summary = serializers.CharField()
    keys = serializers.ListField(child=serializers.CharField(), help_text="Keys or files this part covers")


class DesiredKeySerializer(serializers.Serializer):
    object = serializers.CharField()
    section = serializers.ChoiceField(choices=["labels", "annotations", "spec"])
    key = serializers.CharField()
    value = serializers.CharField(allow_null=True, help_text="null: removed")
    when = serializers.ChoiceField(choices=list(WHENS))


class RenderedSerializer(serializers.Serializer):
    manifest = serializers.DictField(
        child=AnyJsonField(), help_text="The AscendJob with the policy merged in"
    )
    labels = serializers.DictField(child=serializers.CharField())
    annotations = serializers.DictField(child=serializers.CharField())
    removed_labels = serializers.ListField(child=serializers.CharField())
    removed_annotations = serializers.ListField(child=serializers.CharField())
    job_patch = serializers.DictField(child=AnyJsonField(), help_text="Merge patch for the AscendJob")
    podgroup_patch = serializers.DictField(child=AnyJsonField(), help_text="Merge patch for its PodGroup")
    configmap = serializers.DictField(child=AnyJsonField(), allow_null=True)
    artifacts = serializers.DictField(
        child=serializers.CharField(allow_blank=True), help_text="file name -> text"
    )
    effects = EffectSerializer(many=True)
    notes = serializers.ListField(child=serializers.CharField())


class PreviewOutputSerializer(serializers.Serializer):
    valid = serializers.BooleanField()
    # A field named like a Serializer attribute: DRF's metaclass takes it off the class; the stubs don't.
    errors = ErrorSerializer(many=True)  # type: ignore[assignment]
    warnings = ErrorSerializer(many=True)
    spec = PolicySpecSerializer(allow_null=True)
    render = RenderedSerializer(allow_null=True)
    render_error = serializers.CharField(required=False)
    keys = DesiredKeySerializer(many=True, required=False, help_text="Every key the policy sets or removes")
    revision = serializers.IntegerField(
        required=False,
        help_text=(
            "The revision number the render is stamped with (the policy-revision annotation the push "
            "writes): the current revision, or the next one for a draft"
        ),
    )
    live = LiveSerializer()
    diff = serializers.DictField(
        child=AnyJsonField(),
        allow_null=True,
        help_text="Merge patches from the live objects to the rendered ones (ascendjob, podgroup)",
    )
    redacted = serializers.BooleanField(
        help_text=(
            "True for a caller below editor: env values the policy does not render are shown as "
            "'(hidden)', managedFields and kubectl's last-applied copy are left out"
        )
    )


class RevisionOutputSerializer(serializers.ModelSerializer):
    number = serializers.IntegerField(min_value=1)
    restored_from = serializers.IntegerField(min_value=1, allow_null=True)
    author = serializers.CharField(source="author_name")
    preset = serializers.CharField(source="source_preset.name", allow_null=True, default=None)
    spec = PolicySpecSerializer()
    diff = serializers.SerializerMethodField(
        help_text="Merge patch from the previous revision (null for the first)"
    )

    class Meta:
        model = PolicyRevision
        fields = [
            "number",
            "author",
            "created_at",
            "comment",
            "source",
            "preset",
            "restored_from",
            "spec",
            "diff",
        ]

    @extend_schema_field({"type": "object", "additionalProperties": True, "nullable": True})
    def get_diff(self, revision: PolicyRevision) -> Any:
        from apps.core.jsonmerge import merge_patch_diff

        previous = getattr(revision, "previous_spec", None)
        if previous is None:
            return None
        return merge_patch_diff(previous, revision.spec)


class RestoreOutputSerializer(serializers.Serializer):
    revision = RevisionOutputSerializer()
    sync = SyncOutputSerializer(allow_null=True)


class ValidateInputSerializer(StrictInputSerializer):
    spec = AnyJsonField(allow_null=True, help_text="The policy to check (any JSON: results are data)")
    manifest = ManifestField(
        required=False, help_text="The AscendJob it is meant for (YAML string or object)"
    )
    job = serializers.IntegerField(
        required=False, min_value=1, max_value=2**63 - 1, help_text="A registered job to check against"
    )


class ValidateOutputSerializer(serializers.Serializer):
    valid = serializers.BooleanField()
    # A field named like a Serializer attribute: DRF's metaclass takes it off the class; the stubs don't.
    errors = ErrorSerializer(many=True)  # type: ignore[assignment]
    warnings = ErrorSerializer(many=True)
    spec = PolicySpecSerializer(allow_null=True, help_text="The canonical spec when valid")


class RenderInputSerializer(StrictInputSerializer):
    manifest = ManifestField(
        help_text="The AscendJob (YAML string, possibly several documents, or an object)"
    )
    policy = PolicySpecField(required=False)
    preset = serializers.SlugField(max_length=63, required=False)
    format = serializers.ChoiceField(
        choices=["yaml", "json"],
        required=False,
        help_text="Output format; default: the input's (string -> YAML)",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        require_exactly_one(attrs, "policy", "preset")
        return attrs


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string"},
            {"type": "object", "additionalProperties": True},
            {"type": "array", "items": {"type": "object", "additionalProperties": True}},
        ]
    }
)
class RenderedDocumentsField(serializers.JSONField):
    pass


@extend_schema_field(
    {"oneOf": [{"type": "string"}, {"type": "object", "additionalProperties": True}], "nullable": True}
)
class RenderedConfigMapField(serializers.JSONField):
    pass


class RenderOutputSerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=["yaml", "json"])
    manifest = RenderedDocumentsField(help_text="The input documents with the AscendJob merged, same format")
    configmap = RenderedConfigMapField(allow_null=True, help_text="taskd-manager-<job> ConfigMap, if needed")
    artifacts = serializers.DictField(child=serializers.CharField(allow_blank=True))
    effects = EffectSerializer(many=True)
    notes = serializers.ListField(child=serializers.CharField())
    warnings = ErrorSerializer(many=True)
    spec = PolicySpecSerializer()


class PresetOutputSerializer(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.get_username", allow_null=True, default=None)
    spec = serializers.DictField(child=AnyJsonField(), help_text="A policy spec (release may be left out)")
    cluster = serializers.CharField(
        source="cluster.name", allow_null=True, default=None, help_text="Null for a global preset"
    )
    namespace = serializers.CharField(help_text="Empty for a global preset (built-ins, superusers')")
    url = serializers.SerializerMethodField(help_text="This preset's resource (GET, PUT, DELETE)")

    class Meta:
        model = Preset
        fields = [
            "name",
            "cluster",
            "namespace",
            "description",
            "spec",
            "builtin",
            "created_by",
            "created_at",
            "updated_at",
            "url",
        ]

    def get_url(self, preset: Preset) -> str:
        if preset.cluster is None:
            return reverse("api:preset-detail", kwargs={"name": preset.name})
        kwargs = {"cluster": preset.cluster.name, "namespace": preset.namespace, "name": preset.name}
        return reverse("api:namespace-preset", kwargs=kwargs)


class PresetCreateInputSerializer(StrictInputSerializer):
    name = serializers.SlugField(max_length=63)
    description = serializers.CharField(max_length=300, required=False, allow_blank=True, default="")
    spec = PolicySpecField()
    cluster = serializers.CharField(
        max_length=100, required=False, help_text="With namespace: a preset of that namespace"
    )
    namespace = serializers.CharField(
        max_length=63, required=False, help_text="Leave out (with cluster) for a global preset: superusers"
    )


class PresetUpdateInputSerializer(StrictInputSerializer):
    name = serializers.SlugField(max_length=63, required=False, help_text="Must match the URL when given")
    description = serializers.CharField(max_length=300, required=False, allow_blank=True, default="")
    spec = PolicySpecField()

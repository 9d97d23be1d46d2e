"""Input and output shapes of the decisions inbox and the what-if simulator."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.decisions.models import Decision
from apps.decisions.services import allowed_answers
from apps.policies.spec import FAULT_TYPES, PLATFORM_STRATEGIES


class DecisionOutputSerializer(serializers.ModelSerializer):
    job_name = serializers.CharField(source="job.name", read_only=True)
    namespace = serializers.CharField(source="job.namespace", read_only=True)
    allowed = serializers.SerializerMethodField()
    latency_ms = serializers.FloatField(read_only=True, allow_null=True)

    class Meta:
        model = Decision
        fields = [
            "id",
            "job",
            "job_name",
            "namespace",
            "podgroup",
            "confirm_fault",
            "faults",
            "context",
            "state",
            "strategy",
            "decided_by",
            "reason",
            "deadline_at",
            "outcome",
            "last_error",
            "created_at",
            "decided_at",
            "written_at",
            "completed_at",
            "latency_ms",
            "allowed",
        ]

    def get_allowed(self, decision: Decision) -> list[str]:
        """Answers a person may give (only while pending)."""
        return allowed_answers(decision) if decision.state == Decision.State.PENDING else []


class DecisionAnswerInputSerializer(serializers.Serializer):
    strategy = serializers.ChoiceField(choices=list(PLATFORM_STRATEGIES))


class FaultInputSerializer(serializers.Serializer):
    type = serializers.CharField(default="normal", max_length=20, help_text=f"one of {list(FAULT_TYPES)}")
    ranks = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=1_280_000), min_length=1, max_length=1024
    )
    level = serializers.CharField(required=False, allow_blank=True, max_length=40)
    node = serializers.CharField(required=False, allow_blank=True, max_length=100)
    code = serializers.CharField(required=False, allow_blank=True, max_length=20)
    attempts = serializers.ListField(child=serializers.BooleanField(), required=False, max_length=10)
    platform_answer = serializers.ChoiceField(choices=list(PLATFORM_STRATEGIES), required=False)


class SimulateInputSerializer(serializers.Serializer):
    spec = serializers.JSONField(
        required=False, help_text="A draft policy; or give job to use its current one"
    )
    job = serializers.IntegerField(required=False, min_value=1)
    faults: serializers.ListSerializer[Any] = serializers.ListSerializer(
        child=FaultInputSerializer(), min_length=1, max_length=100
    )
    pods = serializers.IntegerField(required=False, min_value=1, max_value=20_000)
    npus_per_pod = serializers.IntegerField(required=False, min_value=1, max_value=64)
    spare_resources = serializers.BooleanField(required=False, default=True)
    supported = serializers.ListField(
        child=serializers.CharField(max_length=32), required=False, max_length=10
    )
    as_ = serializers.ChoiceField(
        choices=["in-effect", "after-recreation"],
        required=False,
        help_text="With job: start from the config the job runs with (in-effect, the default) or from the "
        "draft/current revision as after a recreation",
    )

    def get_fields(self) -> dict[str, Any]:
        fields = super().get_fields()
        fields["as"] = fields.pop("as_")  # "as" is a Python keyword
        return fields

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "spec" not in attrs and "job" not in attrs:
            raise serializers.ValidationError({"spec": "give a draft policy in 'spec', or a job id in 'job'"})
        return attrs


class StepSerializer(serializers.Serializer):
    kind = serializers.CharField()
    strategy = serializers.CharField(allow_null=True)
    reason = serializers.CharField()
    label_changes = serializers.DictField(child=serializers.CharField())
    budget_change = serializers.IntegerField()
    recover_status = serializers.CharField(allow_null=True)
    signal = serializers.CharField(allow_null=True)
    change_strategy = serializers.CharField(allow_null=True)
    pod_ranks = serializers.ListField(child=serializers.IntegerField())
    duration_s = serializers.FloatField()
    code = serializers.IntegerField()


class SimulatedFaultSerializer(serializers.Serializer):
    fault = serializers.IntegerField()
    fault_type = serializers.CharField(required=False)
    ranks = serializers.ListField(child=serializers.IntegerField(), required=False)
    platform = serializers.DictField(allow_null=True, required=False)
    strategies = serializers.ListField(child=serializers.CharField(), required=False)
    # The fault came while the job ran scaled in: straight to stopTrain, then dump or exit (rules.go:322-323).
    while_scaled_in = serializers.BooleanField(required=False)
    # RestartFaultProcess of the reset.json fault list at globalFault; null = no list written there.
    restart_fault_process = serializers.BooleanField(allow_null=True, required=False)
    steps = StepSerializer(many=True, required=False)
    budget_consumed = serializers.DictField(child=serializers.IntegerField(), required=False)
    outcome = serializers.CharField(required=False)
    skipped = serializers.CharField(required=False)


class SimulateOutputSerializer(serializers.Serializer):
    podgroup = serializers.DictField()
    supported = serializers.ListField(child=serializers.CharField())
    faults = SimulatedFaultSerializer(many=True)
    end_state = serializers.DictField()
    warnings = serializers.ListField(child=serializers.DictField())
    start = serializers.DictField(
        required=False, help_text="With job: where the rehearsal started (as, revision, basis, config, note)"
    )

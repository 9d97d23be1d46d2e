"""Validation results: ``Issue``, ``ValidationResult``, the code catalogue and small helpers.

Codes are a public contract (API clients and the UI key on them): add new ones, never rename.
"""

from __future__ import annotations

import json
import math
import reprlib
from dataclasses import dataclass, field
from typing import Any, Literal

from apps.policies.spec import PolicySpec

Severity = Literal["error", "warning"]

# Every code either validator can emit -> one line for docs and the UI.
CODES: dict[str, str] = {
    # --- shape and types -------------------------------------------------------------------------
    "not_an_object": "The policy must be a JSON object.",
    "unknown_field": "A key the policy spec does not define (typo?).",
    "missing_field": "A required key is missing.",
    "invalid_type": "A value has the wrong JSON type (e.g. a string where an integer is expected).",
    "invalid_choice": "A value is not one of a closed set of allowed values.",
    "out_of_range": "A number is outside its allowed range.",
    "conflicting_fields": "The same setting is given twice with different values.",
    "internal_error": "The validator hit an unexpected condition; please report it.",
    # --- release ---------------------------------------------------------------------------------
    "unsupported_release": "mindcluster_version is not a MindCluster release this control plane knows.",
    "release_mismatch": "The policy targets a different MindCluster release than the job runs.",
    "strategy_not_in_release": "A strategy that the targeted MindCluster release does not have yet.",
    "setting_not_in_release": "A setting that the targeted MindCluster release ignores.",
    # --- strategies ------------------------------------------------------------------------------
    "unknown_strategy": "A recover-strategy name ClusterD does not know; it would be silently dropped.",
    "strategy_wrong_case": "A strategy name in the wrong letter case; ClusterD drops it.",
    "strategy_whitespace": "A strategy name with spaces; ClusterD does not trim and drops it.",
    "empty_strategy": "An empty entry in the strategy list (e.g. from ',,').",
    "duplicate_strategy": "A strategy listed more than once (ClusterD de-duplicates it).",
    "exit_only": "Only 'exit' is configured: process-level machinery without any faster strategy.",
    "elastic_training_requires_pytorch": "elastic-training works only for PyTorch jobs.",
    "process_recovery_unsupported_framework": "No MindIO for this framework, so no process-level recovery.",
    "retry_with_no_npu_memory_caching": "retry needs PYTORCH_NO_NPU_MEMORY_CACHING unset in the job.",
    "retry_mindspore_watchdog": "retry on MindSpore needs hccl_watchdog: False in the model YAML.",
    "no_in_container_restarts": "max_restarts 0 stops torchrun from restarting processes in place.",
    "gang_scheduling_required": "Process-level strategies need the Volcano gang scheduler.",
    "operator_injected_env": "The job sets recovery env/labels that the operator (7.2+) injects itself.",
    # --- rescheduling ----------------------------------------------------------------------------
    "force_with_process_strategies": "fault_scheduling force with process strategies (docs say grace).",
    "no_job_level_backstop": "Process strategies with fault_scheduling off: no Job-level backstop.",
    "pod_rescheduling_without_job_rescheduling": "Pod-level rescheduling falls back to Job-level (off).",
    "force_with_host_network": "fault_scheduling 'force' cannot be combined with hostNetwork pods.",
    "retry_times_requires_restart_never": "fault_retry_times > 0 needs restartPolicy Never on every replica.",
    "unconditional_retry_hardware": "Unconditional retry is documented for Atlas 800T A2 / 900 A2 PoD only.",
    "ttp_port_conflict": "ttp_port collides with a port MindCluster already uses.",
    # --- sub-health ------------------------------------------------------------------------------
    "grace_exit_requires_dump": "sub_healthy_strategy 'graceExit' needs the 'dump' strategy.",
    "hot_switch_without_strategies": "hotSwitch uses the process-level machinery even with no strategies.",
    "grace_exit_needs_dump_first": "graceExit acts only when dump is the first configured strategy.",
    "hot_switch_unsupported_framework": "hotSwitch works only for PyTorch and MindSpore jobs.",
    "hot_switch_needs_7_2": "hotSwitch exists from MindCluster 7.2.",
    "hot_switch_needs_fault_scheduling": "hotSwitch with fault_scheduling off never finishes (Volcano).",
    # --- platform mode ---------------------------------------------------------------------------
    "platform_mode_without_strategies": "platform_mode needs at least one strategy to choose from.",
    "decision_rules_without_platform_mode": "decision_rules only run in platform_mode.",
    "too_many_decision_rules": "More decision_rules than the cap (100); merge rules with one strategy.",
    "too_many_items": "A list (strategies, a rule's fault types or levels) longer than the cap (100).",
    "platform_setting_ignored": "A platform-mode setting given without platform_mode; it has no effect.",
    "platform_strategy_unsupported": "ProcessRecoverStrategy accepts only retry, recover, dump or exit.",
    "rule_strategy_not_configured": "A rule answers with a strategy the policy does not configure.",
    "default_strategy_not_configured": "default_strategy is not configured, so ClusterD cannot use it.",
    "standing_answer_not_accepted": "The standing answer (default_strategy) must be retry, recover or dump.",
    "retry_answer_needs_standing_retry": "A rule answers retry but the standing answer is not retry.",
    "platform_scale_in_without_answer": "ClusterD picks elastic-training itself, whatever the answer.",
    "platform_retry_after_pre_exit": "From 26.0, retry is likely unreachable in platform mode (preExit).",
    "unknown_match_key": "A decision-rule match key the rule engine does not know.",
    "max_ranks_below_min_ranks": "A rule's max_ranks is smaller than its min_ranks; it never matches.",
    "min_repeats_without_window": "A rule's min_repeats needs repeat_within_s.",
    "rule_never_matches": "A rule whose match can never hold (e.g. an empty list).",
    "rule_unreachable": "A rule after a catch-all rule; it never runs.",
    "unknown_fault_level": "A fault_level value MindCluster is not known to report.",
    # --- manifest (AscendJob operator checks) ----------------------------------------------------
    "manifest_not_an_object": "The manifest must be a YAML/JSON mapping.",
    "manifest_wrong_api_version": "apiVersion must be mindxdl.gitee.com/v1.",
    "manifest_wrong_kind": "kind must be AscendJob.",
    "manifest_invalid_type": "A manifest value has the wrong type.",
    "manifest_empty_name": "metadata.name is missing or empty.",
    "manifest_invalid_name": "metadata.name is not a valid DNS-1123 label.",
    "manifest_name_too_long": "Pod/Service names built from metadata.name exceed 63 characters.",
    "manifest_name_starts_with_digit": "metadata.name starts with a digit; Service names need a letter.",
    "manifest_missing_framework": "The framework label is missing.",
    "manifest_invalid_framework": "The framework label is not pytorch, mindspore or tensorflow.",
    "manifest_missing_replica_specs": "spec or spec.replicaSpecs is missing.",
    "manifest_invalid_replica_type": "A replica type the framework does not allow.",
    "manifest_replicas_out_of_range": "replicas must be between 0 and 20000.",
    "manifest_leader_replicas": "The leader replica (Master/Scheduler/Chief) must have exactly 1 replica.",
    "manifest_missing_leader": "The job has no leader replica (Master/Scheduler/Chief).",
    "manifest_missing_containers": "A replica's pod template has no containers.",
    "manifest_missing_ascend_container": "A replica has no container named exactly 'ascend'.",
    "manifest_empty_image": "The 'ascend' container has no image.",
    "manifest_invalid_success_policy": "successPolicy must be '' or 'AllWorkers'.",
    "manifest_invalid_restart_policy": "restartPolicy must be Always, OnFailure, Never or ExitCode.",
    "manifest_scaling_label_missing": "An elastic-scaling job lacks its group-name or jobID label.",
    "manifest_invalid_scale_out_type": "The scaleout-type label is not ROCE or UBOE.",
}


def codes() -> dict[str, str]:
    """Every code the validators can emit, mapped to a one-line description (for docs and the UI)."""
    return dict(CODES)


@dataclass(frozen=True)
class Issue:
    """One problem found in a policy or manifest."""

    code: str  # stable snake_case code from CODES
    field: str  # JSON pointer into the spec ("/strategies/2"), or "manifest:/..." into the manifest
    message: str  # one plain sentence that says why
    allowed: list[Any] | None = None  # allowed values, or [min, max] for a range
    severity: Severity = "error"

    def to_dict(self) -> dict[str, Any]:
        """JSON form; ``allowed`` is omitted when there is no closed set."""
        data: dict[str, Any] = {"code": self.code, "field": self.field, "message": self.message}
        if self.allowed is not None:
            data["allowed"] = list(self.allowed)
        data["severity"] = self.severity
        return data


@dataclass(frozen=True)
class ValidationResult:
    """Errors block a policy; warnings do not. ``spec`` is set only when there are no errors."""

    errors: tuple[Issue, ...] = ()
    warnings: tuple[Issue, ...] = ()
    spec: PolicySpec | None = None

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        """``{"valid", "errors", "warnings", "spec"}`` with ``spec`` in canonical form or None."""
        return {
            "valid": self.ok,
            "errors": [issue.to_dict() for issue in self.errors],
            "warnings": [issue.to_dict() for issue in self.warnings],
            "spec": self.spec.to_dict() if self.spec is not None and self.ok else None,
        }


@dataclass
class IssueCollector:
    """Accumulates issues in the order they are found."""

    issues: list[Issue] = field(default_factory=list)

    def error(self, code: str, where: str, message: str, allowed: list[Any] | None = None) -> None:
        self.issues.append(Issue(code, where, message, allowed, "error"))

    def warn(self, code: str, where: str, message: str, allowed: list[Any] | None = None) -> None:
        self.issues.append(Issue(code, where, message, allowed, "warning"))

    @property
    def errors(self) -> tuple[Issue, ...]:
        return tuple(i for i in self.issues if i.severity == "error")

    @property
    def warnings(self) -> tuple[Issue, ...]:
        return tuple(i for i in self.issues if i.severity == "warning")


def pointer(*parts: str | int) -> str:
    """RFC 6901 JSON pointer from path parts; the document root is written "/" so it is never empty."""
    if not parts:
        return "/"
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


_MAX_TEXT = 40
_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxstring = 40
_SHORT_REPR.maxother = 40
_SHORT_REPR.maxlevel = 2
_SHORT_REPR.maxlist = 4
_SHORT_REPR.maxdict = 4


def describe(value: Any) -> str:
    """A short, safe rendering of an untrusted value for a message (never raises)."""
    try:
        if isinstance(value, bool) or value is None:
            return "true" if value is True else "false" if value is False else "null"
        if isinstance(value, int) and value.bit_length() > 64:
            # str() of a huge int can raise (int_max_str_digits) and would flood the message anyway.
            return "a very large integer"
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        if isinstance(value, str):
            # JSON-style double quotes: policies are written in JSON, not Python.
            text = value if len(value) <= _MAX_TEXT else value[:_MAX_TEXT] + "..."
            return json.dumps(text, ensure_ascii=False)
        return _SHORT_REPR.repr(value)
    except Exception:  # a hostile __repr__ must not break validation
        return f"a {type(value).__name__} value"


def key_text(key: Any) -> str:
    """A mapping key as text for a JSON pointer; non-string keys (from YAML) are rendered safely."""
    return key if isinstance(key, str) else describe(key)


def json_type(value: Any) -> str:
    """The JSON-ish type name of a value, for 'expected X, got Y' messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__

"""Rules of ``validate_policy`` and ``validate_manifest``: one table row per rule, plus the contracts."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from apps.policies.spec import RELEASES, STRATEGIES, JobContext, PolicySpec, ReplicaFacts
from apps.policies.validation import Issue, ValidationResult, codes, validate_manifest, validate_policy

NAN = float("nan")
LEADERS = {"pytorch": "Master", "mindspore": "Scheduler", "tensorflow": "Chief"}


def job(
    framework: str | None = "pytorch",
    *,
    restart: str = "",
    env: tuple[str, ...] = (),
    host_network: bool = False,
    scheduler: str | None = "volcano",
    labels: dict[str, str] | None = None,
    release: str | None = None,
) -> JobContext:
    """A two-role job (leader + 2 workers, 8 NPUs each) with the given facts."""
    leader = LEADERS.get(framework or "", "Master")
    replicas = tuple(
        ReplicaFacts(role, count, restart, 8, ("ascend",), env, host_network)
        for role, count in ((leader, 1), ("Worker", 2))
    )
    all_labels = {"framework": framework} if framework else {}
    all_labels.update(labels or {})
    return JobContext(
        name="llama",
        namespace="train",
        framework=framework,
        mindcluster_version=release,
        scheduler_name=scheduler,
        replicas=replicas,
        labels=all_labels,
    )


def platform(strategies: Any, rules: Any, **extra: Any) -> dict[str, Any]:
    return {"platform_mode": True, "strategies": strategies, "decision_rules": rules, **extra}


# fmt: off
E, W = "error", "warning"
R0 = "/decision_rules/0"

# (id, policy, job, code, field, severity)
POLICY_ROWS: list[tuple[str, Any, JobContext | None, str, str, str]] = [
    # --- shape and types
    ("null-policy", None, None, "not_an_object", "/", E),
    ("list-policy", ["recover"], None, "not_an_object", "/", E),
    ("string-policy", "recover", None, "not_an_object", "/", E),
    ("typo-field", {"strategis": ["recover"]}, None, "unknown_field", "/strategis", E),
    ("slash-in-key", {"a/b": 1}, None, "unknown_field", "/a~1b", E),
    ("rule-extra-key", platform(["recover"], [{"strategy": "recover", "when": {}}]), None,
     "unknown_field", "/decision_rules/0/when", E),
    ("rules-object-extra-key", {"decision_rules": {"rules": [], "timeout": 5}}, None,
     "unknown_field", "/decision_rules/timeout", E),
    ("rule-without-strategy", platform(["recover"], [{"match": {}}]), None,
     "missing_field", "/decision_rules/0/strategy", E),
    ("bool-as-int", {"max_restarts": True}, None, "invalid_type", "/max_restarts", E),
    ("quoted-int", {"fault_retry_times": "10"}, None, "invalid_type", "/fault_retry_times", E),
    ("float-int", {"monitor_interval": 1.5}, None, "invalid_type", "/monitor_interval", E),
    ("nan-port", {"ttp_port": NAN}, None, "invalid_type", "/ttp_port", E),
    ("null-int", {"wait_reschedule_timeout": None}, None, "invalid_type", "/wait_reschedule_timeout", E),
    ("strategies-number", {"strategies": 5}, None, "invalid_type", "/strategies", E),
    ("strategy-entry-number", {"strategies": ["recover", 3]}, None, "invalid_type", "/strategies/1", E),
    ("on-as-bool", {"pod_rescheduling": "on"}, None, "invalid_type", "/pod_rescheduling", E),
    ("platform-mode-int", {"platform_mode": 1}, None, "invalid_type", "/platform_mode", E),
    ("release-bool", {"mindcluster_version": True}, None, "invalid_type", "/mindcluster_version", E),
    ("rules-not-list", {"platform_mode": True, "strategies": ["recover"], "decision_rules": 7}, None,
     "invalid_type", "/decision_rules", E),
    ("rule-not-object", platform(["recover"], ["recover"]), None, "invalid_type", "/decision_rules/0", E),
    ("match-not-object", platform(["recover"], [{"match": [], "strategy": "recover"}]), None,
     "invalid_type", "/decision_rules/0/match", E),
    ("rank0-not-bool", platform(["recover"], [{"match": {"rank0": "yes"}, "strategy": "recover"}]), None,
     "invalid_type", R0 + "/match/rank0", E),
    ("fault-level-number", platform(["recover"], [{"match": {"fault_level": [3]}, "strategy": "recover"}]),
     None, "invalid_type", R0 + "/match/fault_level/0", E),
    ("fault-scheduling-case", {"fault_scheduling": "Grace"}, None, "invalid_choice", "/fault_scheduling", E),
    ("fault-scheduling-on", {"fault_scheduling": "on"}, None, "invalid_choice", "/fault_scheduling", E),
    ("sub-healthy-case", {"sub_healthy_strategy": "graceexit"}, None,
     "invalid_choice", "/sub_healthy_strategy", E),
    # "ask" cannot be the standing answer ClusterD waits for before it asks (issue #13)
    ("default-ask", {"default_strategy": "ask"}, None,
     "standing_answer_not_accepted", "/default_strategy", E),
    ("fault-type-case", platform(["retry"], [{"match": {"fault_type": ["UCE"]}, "strategy": "retry"}]), None,
     "invalid_choice", R0 + "/match/fault_type/0", E),
    ("rule-strategy-typo", platform(["recover"], [{"strategy": "recovr"}]), None,
     "invalid_choice", "/decision_rules/0/strategy", E),
    ("retry-times-high", {"fault_retry_times": 100_001}, None, "out_of_range", "/fault_retry_times", E),
    ("retry-times-huge", {"fault_retry_times": 10**30}, None, "out_of_range", "/fault_retry_times", E),
    ("max-restarts-negative", {"max_restarts": -1}, None, "out_of_range", "/max_restarts", E),
    ("max-restarts-int16", {"max_restarts": 32_768}, None, "out_of_range", "/max_restarts", E),
    ("monitor-zero", {"monitor_interval": 0}, None, "out_of_range", "/monitor_interval", E),
    ("wait-low", {"wait_reschedule_timeout": 29}, None, "out_of_range", "/wait_reschedule_timeout", E),
    ("wait-high", {"wait_reschedule_timeout": 271}, None, "out_of_range", "/wait_reschedule_timeout", E),
    ("ttp-privileged", {"ttp_port": 80}, None, "out_of_range", "/ttp_port", E),
    ("ttp-too-high", {"ttp_port": 65_536}, None, "out_of_range", "/ttp_port", E),
    ("decision-timeout-300", {"decision_timeout_s": 300}, None, "out_of_range", "/decision_timeout_s", E),
    ("backoff-zero", {"backoff_limit": 0}, None, "out_of_range", "/backoff_limit", E),
    ("backoff-int32", {"backoff_limit": 2**31}, None, "out_of_range", "/backoff_limit", E),
    ("repeat-window-long", platform(["recover"], [{"match": {"repeat_within_s": 86_401}, "strategy": "ask"}]),
     None, "out_of_range", R0 + "/match/repeat_within_s", E),
    ("min-repeats-one",
     platform(["recover"], [{"match": {"repeat_within_s": 60, "min_repeats": 1}, "strategy": "ask"}]),
     None, "out_of_range", R0 + "/match/min_repeats", E),
    ("min-ranks-zero", platform(["recover"], [{"match": {"min_ranks": 0}, "strategy": "ask"}]), None,
     "out_of_range", R0 + "/match/min_ranks", E),
    ("rules-object-conflict",
     {"platform_mode": True, "strategies": ["recover"], "decision_timeout_s": 200,
      "decision_rules": {"rules": [], "timeout_s": 100}},
     None, "conflicting_fields", "/decision_rules/timeout_s", E),
    # --- release
    ("release-6", {"mindcluster_version": "6.0.RC3"}, None, "unsupported_release", "/mindcluster_version", E),
    ("release-7.4", {"mindcluster_version": "7.4"}, None, "unsupported_release", "/mindcluster_version", E),
    ("release-latest", {"mindcluster_version": "latest"}, None,
     "unsupported_release", "/mindcluster_version", E),
    ("release-mismatch", {"mindcluster_version": "26.1"}, job(release="7.3.0"),
     "release_mismatch", "/mindcluster_version", W),
    ("in-place-on-7.0", {"mindcluster_version": "7.0", "strategies": ["recover", "recover-in-place"]}, None,
     "strategy_not_in_release", "/strategies/1", E),
    ("elastic-on-7.1", {"mindcluster_version": "7.1.RC1", "strategies": "recover,elastic-training"}, None,
     "strategy_not_in_release", "/strategies", E),
    ("wait-timeout-on-7.1", {"mindcluster_version": "7.1", "wait_reschedule_timeout": 120}, None,
     "setting_not_in_release", "/wait_reschedule_timeout", W),
    # --- strategies
    ("strategy-typo", {"strategies": ["recovery"]}, None, "unknown_strategy", "/strategies/0", E),
    ("strategy-inner-space", {"strategies": ["recover in place"]}, None, "unknown_strategy", "/strategies/0",
     E),
    ("strategy-case", {"strategies": ["Retry"]}, None, "strategy_wrong_case", "/strategies/0", E),
    ("strategy-leading-space", {"strategies": [" recover"]}, None, "strategy_whitespace", "/strategies/0",
     E),
    ("strategy-string-space", {"strategies": "recover, dump"}, None, "strategy_whitespace", "/strategies",
     E),
    ("strategy-empty-entry", {"strategies": "recover,,dump"}, None, "empty_strategy", "/strategies", W),
    ("strategy-empty-list-entry", {"strategies": ["recover", ""]}, None, "empty_strategy", "/strategies/1",
     W),
    ("strategy-duplicate", {"strategies": ["dump", "recover", "dump"]}, None,
     "duplicate_strategy", "/strategies/2", W),
    ("exit-only", {"strategies": ["exit"]}, None, "exit_only", "/strategies/0", W),
    ("elastic-mindspore", {"strategies": ["recover", "elastic-training"]}, job("mindspore"),
     "elastic_training_requires_pytorch", "/strategies/1", E),
    ("elastic-tensorflow", {"strategies": ["elastic-training"]}, job("tensorflow"),
     "elastic_training_requires_pytorch", "/strategies/0", E),
    ("tensorflow-process", {"strategies": ["recover"]}, job("tensorflow"),
     "process_recovery_unsupported_framework", "/strategies", W),
    ("retry-no-caching", {"strategies": ["recover", "retry"]}, job(env=("PYTORCH_NO_NPU_MEMORY_CACHING",)),
     "retry_with_no_npu_memory_caching", "/strategies/1", E),
    ("retry-mindspore", {"strategies": ["retry"]}, job("mindspore"), "retry_mindspore_watchdog",
     "/strategies/0", W),
    ("max-restarts-zero", {"strategies": ["recover"], "max_restarts": 0}, None,
     "no_in_container_restarts", "/max_restarts", W),
    ("default-scheduler", {"strategies": ["recover"]}, job(scheduler="default-scheduler"),
     "gang_scheduling_required", "/strategies", E),
    ("hand-set-env", {"strategies": ["recover"], "mindcluster_version": "7.3"}, job(env=("PROCESS_RECOVER",)),
     "operator_injected_env", "/strategies", W),
    ("hand-set-label", {"strategies": ["dump"], "mindcluster_version": "7.2"},
     job(labels={"process-recover-enable": "on"}), "operator_injected_env", "/strategies", W),
    ("hand-set-env-hot-switch", {"sub_healthy_strategy": "hotSwitch"},
     job(env=("ENABLE_RESTART_FAULT_PROCESS",)),
     "operator_injected_env", "/sub_healthy_strategy", W),
    # --- rescheduling
    ("force-7.2", {"mindcluster_version": "7.2", "strategies": ["recover"], "fault_scheduling": "force"},
     None,
     "force_with_process_strategies", "/fault_scheduling", W),
    ("off-with-strategies", {"strategies": ["recover"], "fault_scheduling": "off"}, None,
     "no_job_level_backstop", "/fault_scheduling", W),
    ("pod-without-job", {"pod_rescheduling": True, "fault_scheduling": "off"}, None,
     "pod_rescheduling_without_job_rescheduling", "/pod_rescheduling", W),
    ("force-host-network", {"fault_scheduling": "force"}, job(host_network=True),
     "force_with_host_network", "/fault_scheduling", E),
    ("retry-times-on-failure", {"fault_retry_times": 3}, job(restart="OnFailure"),
     "retry_times_requires_restart_never", "/fault_retry_times", E),
    ("retry-times-exit-code", {"fault_retry_times": 3}, job(restart="ExitCode"),
     "retry_times_requires_restart_never", "/fault_retry_times", E),
    ("retry-times-300t", {"fault_retry_times": 3}, job(labels={"ring-controller.atlas": "ascend-910"}),
     "unconditional_retry_hardware", "/fault_retry_times", W),
    ("ttp-taskd", {"ttp_port": 9601}, None, "ttp_port_conflict", "/ttp_port", E),
    ("ttp-proxy", {"ttp_port": 9602}, None, "ttp_port_conflict", "/ttp_port", E),
    ("ttp-ascendjob", {"ttp_port": 2222}, None, "ttp_port_conflict", "/ttp_port", E),
    ("ttp-clusterd", {"ttp_port": 8899}, None, "ttp_port_conflict", "/ttp_port", E),
    # --- sub-health
    ("grace-exit-no-dump", {"strategies": ["recover"], "sub_healthy_strategy": "graceExit"}, None,
     "grace_exit_requires_dump", "/sub_healthy_strategy", E),
    ("hot-switch-alone", {"sub_healthy_strategy": "hotSwitch"}, None,
     "hot_switch_without_strategies", "/sub_healthy_strategy", W),
    # controller.go:448-456 (onlySupportDumpStrategy): the priority-sorted configuration must start with
    # dump, else fault_recover_service.go:345-350 skips every sub-healthy fault
    ("grace-exit-dump-not-first", {"strategies": ["retry", "dump"], "sub_healthy_strategy": "graceExit"},
     None, "grace_exit_needs_dump_first", "/sub_healthy_strategy", W),
    # controller.go:436-446: in platform mode the answer ClusterD holds (the standing one) must be dump
    ("grace-exit-platform-standing-recover",
     {**platform(["dump", "exit"], [], default_strategy="recover"), "sub_healthy_strategy": "graceExit"},
     None, "grace_exit_needs_dump_first", "/sub_healthy_strategy", W),
    # fault_recover_service.go:352-359: hotSwitch on another framework turns into ignore
    ("hot-switch-tensorflow", {"sub_healthy_strategy": "hotSwitch"}, job("tensorflow"),
     "hot_switch_unsupported_framework", "/sub_healthy_strategy", E),
    ("hot-switch-7.1", {"mindcluster_version": "7.1", "sub_healthy_strategy": "hotSwitch"}, None,
     "hot_switch_needs_7_2", "/sub_healthy_strategy", E),
    # Volcano deletes the old pod only for jobs with fault-scheduling on (ascend-for-volcano
    # internal/rescheduling/reschedule.go:108-114); ClusterD waits for it without a timeout (rules.go:129-130)
    ("hot-switch-scheduling-off", {"sub_healthy_strategy": "hotSwitch", "fault_scheduling": "off"}, None,
     "hot_switch_needs_fault_scheduling", "/fault_scheduling", W),
    # --- platform mode
    ("platform-empty", {"platform_mode": True}, None, "platform_mode_without_strategies", "/platform_mode",
     E),
    ("rules-without-platform", {"strategies": ["recover"], "decision_rules": [{"strategy": "recover"}]}, None,
     "decision_rules_without_platform_mode", "/decision_rules", E),
    ("too-many-rules",  # issue #16: capped, counted before any rule is read
     {"strategies": ["retry"], "platform_mode": True,
      "decision_rules": [{"match": {"fault_type": "uce"}, "strategy": "retry"}] * 101}, None,
     "too_many_decision_rules", "/decision_rules", E),
    ("too-many-levels",  # issue #24: list caps, counted before any entry is read
     platform(["recover"], [{"match": {"fault_level": ["RestartBusiness"] * 101}, "strategy": "recover"}]),
     None, "too_many_items", R0 + "/match/fault_level", E),
    ("too-many-strategies", {"strategies": ["recover"] * 101}, None, "too_many_items", "/strategies", E),
    ("default-without-platform", {"default_strategy": "dump"}, None,
     "platform_setting_ignored", "/default_strategy", W),
    ("timeout-without-platform", {"decision_timeout_s": 60}, None,
     "platform_setting_ignored", "/decision_timeout_s", W),
    ("rule-in-place", platform(["recover-in-place"], [{"strategy": "recover-in-place"}]), None,
     "platform_strategy_unsupported", "/decision_rules/0/strategy", E),
    ("rule-elastic", platform(["recover"], [{"match": {}, "strategy": "elastic-training"}]), None,
     "platform_strategy_unsupported", "/decision_rules/0/strategy", E),
    ("rule-not-configured",
     platform(["recover", "dump"],
              [{"strategy": "ask"}, {"strategy": "recover"}, {"match": {}, "strategy": "ask"},
                                    {"strategy": "retry"}]),
     None, "rule_strategy_not_configured", "/decision_rules/3/strategy", E),
    ("rule-recover-only-in-place",
     platform(["recover-in-place"], [{"match": {"fault_type": "normal"}, "strategy": "recover"}],
              default_strategy="exit"),
     None, "rule_strategy_not_configured", "/decision_rules/0/strategy", E),
    ("default-not-configured", platform(["retry"], []), None,
     "default_strategy_not_configured", "/default_strategy", E),
    # fault_recover_platform_plugin.go:30-39: exit is no standing answer (only a final one)
    ("default-exit-standing", platform(["recover"], [], default_strategy="exit"), None,
     "standing_answer_not_accepted", "/default_strategy", E),
    # controller.go:364-370 + 838-857: the retry path is chosen from the standing answer
    ("retry-rule-recover-standing",
     platform(["retry", "recover"], [{"match": {"fault_type": "uce"}, "strategy": "retry"}]), None,
     "retry_answer_needs_standing_retry", "/decision_rules/0/strategy", W),
    # controller.go:1107-1135: scale-in is chosen without the platform's answer (the old warning said
    # "never used", which the source contradicts)
    ("platform-elastic", platform(["recover", "elastic-training"], []), None,
     "platform_scale_in_without_answer", "/strategies", W),
    # fault_recover_service.go:181-187 + controller.go:364-370 (facts D5): v26 preExit before the answer
    ("platform-retry-v26",
     platform(["retry", "recover"], [], default_strategy="retry", mindcluster_version="26.1"), None,
     "platform_retry_after_pre_exit", "/strategies/0", W),
    ("match-key-typo", platform(["recover"], [{"match": {"fault_types": ["uce"]}, "strategy": "ask"}]), None,
     "unknown_match_key", R0 + "/match/fault_types", E),
    ("max-below-min", platform(["recover"], [{"match": {"min_ranks": 8, "max_ranks": 4}, "strategy": "ask"}]),
     None, "max_ranks_below_min_ranks", R0 + "/match/max_ranks", E),
    ("repeats-without-window", platform(["recover"], [{"match": {"min_repeats": 3}, "strategy": "ask"}]),
     None,
     "min_repeats_without_window", R0 + "/match/min_repeats", E),
    ("empty-fault-type", platform(["recover"], [{"match": {"fault_type": []}, "strategy": "ask"}]), None,
     "rule_never_matches", R0 + "/match/fault_type", W),
    ("after-catch-all",
     platform(["recover"], [{"strategy": "ask"}, {"match": {"rank0": True}, "strategy": "exit"}]),
     None, "rule_unreachable", "/decision_rules/1", W),
    ("unknown-level", platform(["recover"], [{"match": {"fault_level": "Fatal"}, "strategy": "ask"}]), None,
     "unknown_fault_level", R0 + "/match/fault_level", W),
]
# fmt: on


def issues_of(result: ValidationResult) -> list[Issue]:
    return [*result.errors, *result.warnings]


@pytest.mark.parametrize(
    ("policy", "context", "code", "field", "severity"),
    [row[1:] for row in POLICY_ROWS],
    ids=[row[0] for row in POLICY_ROWS],
)
def test_policy_rule(policy: Any, context: JobContext | None, code: str, field: str, severity: str) -> None:
    result = validate_policy(policy, context)
    found = [(i.code, i.field, i.severity) for i in issues_of(result)]
    assert (code, field, severity) in found, found
    issue = next(i for i in issues_of(result) if (i.code, i.field) == (code, field))
    assert issue.message.endswith((".", "?")) and len(issue.message) > 20
    if severity == "error":
        assert not result.ok and result.spec is None
    assert "internal_error" not in {c for c, _, _ in found}


# fmt: off
# Policies that look suspicious but are fine: (id, policy, job, code that must NOT appear)
CLEAN_ROWS: list[tuple[str, Any, JobContext | None, str]] = [
    ("force-on-7.1-like-seed-000", {"mindcluster_version": "7.1", "strategies": "recover,dump",
                                    "fault_scheduling": "force"}, None, "force_with_process_strategies"),
    ("pytorch-7.0-elastic-agent", {"mindcluster_version": "7.0", "strategies": ["retry", "recover"]}, job(),
     "strategy_not_in_release"),
    ("restart-unset-is-never", {"fault_retry_times": 3}, job(restart=""),
     "retry_times_requires_restart_never"),
    ("restart-never", {"fault_retry_times": 3}, job(restart="Never"), "retry_times_requires_restart_never"),
    ("a2-server", {"fault_retry_times": 3}, job(labels={"ring-controller.atlas": "ascend-910b"}),
     "unconditional_retry_hardware"),
    ("hand-set-env-on-7.1", {"mindcluster_version": "7.1", "strategies": ["recover"]},
     job(env=("PROCESS_RECOVER",)),
     "operator_injected_env"),
    ("retry-caching-other-strategy", {"strategies": ["recover"]}, job(env=("PYTORCH_NO_NPU_MEMORY_CACHING",)),
     "retry_with_no_npu_memory_caching"),
    ("grace-exit-with-dump", {"strategies": ["dump"], "sub_healthy_strategy": "graceExit"}, None,
     "grace_exit_requires_dump"),
    ("grace-exit-dump-first", {"strategies": ["dump"], "sub_healthy_strategy": "graceExit"}, None,
     "grace_exit_needs_dump_first"),
    ("grace-exit-platform-standing-dump",
     {**platform(["dump"], [], default_strategy="dump"), "sub_healthy_strategy": "graceExit"}, None,
     "grace_exit_needs_dump_first"),
    ("hot-switch-mindspore", {"sub_healthy_strategy": "hotSwitch"}, job("mindspore"),
     "hot_switch_unsupported_framework"),
    ("rule-exit-always-ok", platform(["retry"], [{"strategy": "exit"}], default_strategy="retry"), None,
     "rule_strategy_not_configured"),
    ("scheduler-unset", {"strategies": ["recover"]}, job(scheduler=None), "gang_scheduling_required"),
    ("same-release", {"mindcluster_version": "7.3"}, job(release="7.3.0"), "release_mismatch"),
    ("mindspore-without-retry", {"strategies": ["recover"]}, job("mindspore"), "retry_mindspore_watchdog"),
]
# fmt: on


@pytest.mark.parametrize(
    ("policy", "context", "absent"), [r[1:] for r in CLEAN_ROWS], ids=[r[0] for r in CLEAN_ROWS]
)
def test_rule_does_not_fire(policy: Any, context: JobContext | None, absent: str) -> None:
    result = validate_policy(policy, context)
    assert result.ok, result.to_dict()["errors"]
    assert absent not in {i.code for i in issues_of(result)}


# --- manifests -----------------------------------------------------------------------------------
def ascendjob(framework: str = "pytorch", workers: int = 2, npus: int = 8) -> dict[str, Any]:
    """A valid AscendJob manifest."""
    leader = LEADERS[framework]

    def replica(count: int) -> dict[str, Any]:
        container = {
            "name": "ascend",
            "image": "mindspeed:1.0",
            "resources": {"requests": {"huawei.com/Ascend910": npus}},
        }
        template = {"spec": {"containers": [container]}}
        return {"replicas": count, "restartPolicy": "Never", "template": template}

    return {
        "apiVersion": "mindxdl.gitee.com/v1",
        "kind": "AscendJob",
        "metadata": {"name": "llama-train", "labels": {"framework": framework}},
        "spec": {
            "schedulerName": "volcano",
            "successPolicy": "AllWorkers",
            "replicaSpecs": {leader: replica(1), "Worker": replica(workers)},
        },
    }


def edit(change: Any, framework: str = "pytorch", **kwargs: Any) -> dict[str, Any]:
    manifest = ascendjob(framework, **kwargs)
    change(manifest)
    return manifest


def roles(manifest: dict[str, Any]) -> dict[str, Any]:
    return manifest["spec"]["replicaSpecs"]


def pod(manifest: dict[str, Any], role: str) -> dict[str, Any]:
    return roles(manifest)[role]["template"]["spec"]


def ascend(manifest: dict[str, Any], role: str) -> dict[str, Any]:
    return pod(manifest, role)["containers"][0]


# fmt: off
RS = "manifest:/spec/replicaSpecs"
MANIFEST_ROWS: list[tuple[str, Any, str, str, str]] = [
    ("not-mapping", "kind: AscendJob", "manifest_not_an_object", "manifest:/", E),
    ("api-version", edit(lambda m: m.update(apiVersion="batch/v1")), "manifest_wrong_api_version",
     "manifest:/apiVersion", E),
    ("kind", edit(lambda m: m.update(kind="Job")), "manifest_wrong_kind", "manifest:/kind", E),
    ("metadata-list", edit(lambda m: m.update(metadata=[])), "manifest_invalid_type", "manifest:/metadata",
     E),
    ("replicas-string", edit(lambda m: roles(m)["Worker"].update(replicas="2")),
     "manifest_invalid_type", f"{RS}/Worker/replicas", E),
    ("name-null", edit(lambda m: m["metadata"].update(name=None)), "manifest_empty_name",
     "manifest:/metadata/name", E),
    ("name-empty", edit(lambda m: m["metadata"].update(name="")), "manifest_empty_name",
     "manifest:/metadata/name", E),
    ("name-underscore", edit(lambda m: m["metadata"].update(name="Llama_Train")), "manifest_invalid_name",
     "manifest:/metadata/name", E),
    ("name-64", edit(lambda m: m["metadata"].update(name="a" * 64)), "manifest_invalid_name",
     "manifest:/metadata/name", E),
    ("name-too-long-for-pods", edit(lambda m: m["metadata"].update(name="a" * 55), workers=100),
     "manifest_name_too_long", "manifest:/metadata/name", E),
    ("name-digit", edit(lambda m: m["metadata"].update(name="7b-train")), "manifest_name_starts_with_digit",
     "manifest:/metadata/name", W),
    ("no-framework", edit(lambda m: m["metadata"].update(labels={})), "manifest_missing_framework",
     "manifest:/metadata/labels/framework", E),
    ("framework-case", edit(lambda m: m["metadata"]["labels"].update(framework="PyTorch")),
     "manifest_invalid_framework", "manifest:/metadata/labels/framework", E),
    ("no-replica-specs", edit(lambda m: m["spec"].pop("replicaSpecs")), "manifest_missing_replica_specs",
     "manifest:/spec/replicaSpecs", E),
    ("no-spec", edit(lambda m: m.pop("spec")), "manifest_missing_replica_specs", "manifest:/spec", E),
    ("scheduler-role-on-pytorch", edit(lambda m: roles(m).update(
        Scheduler=copy.deepcopy(roles(m)["Master"]))),
     "manifest_invalid_replica_type", f"{RS}/Scheduler", E),
    ("replicas-20001", edit(lambda m: roles(m)["Worker"].update(replicas=20_001)),
     "manifest_replicas_out_of_range", f"{RS}/Worker/replicas", E),
    ("replicas-negative", edit(lambda m: roles(m)["Worker"].update(replicas=-1)),
     "manifest_replicas_out_of_range", f"{RS}/Worker/replicas", E),
    ("two-masters", edit(lambda m: roles(m)["Master"].update(replicas=2)),
     "manifest_leader_replicas", f"{RS}/Master/replicas", E),
    ("no-master", edit(lambda m: roles(m).pop("Master")), "manifest_missing_leader", RS, E),
    ("no-chief", edit(lambda m: roles(m).pop("Chief"), "tensorflow"),
     "manifest_missing_leader", RS, E),
    ("mindspore-no-scheduler-16-npus", edit(lambda m: roles(m).pop("Scheduler"), "mindspore"),
     "manifest_missing_leader", RS, E),
    ("no-containers", edit(lambda m: pod(m, "Worker").update(containers=[])),
     "manifest_missing_containers", f"{RS}/Worker/template/spec/containers", E),
    ("container-renamed",
     edit(lambda m: ascend(m, "Worker").update(name="main")),
     "manifest_missing_ascend_container", f"{RS}/Worker/template/spec/containers", E),
    ("empty-image",
     edit(lambda m: ascend(m, "Master").update(image="")),
     "manifest_empty_image", f"{RS}/Master/template/spec/containers/0/image", E),
    ("success-policy", edit(lambda m: m["spec"].update(successPolicy="AnyWorker")),
     "manifest_invalid_success_policy", "manifest:/spec/successPolicy", E),
    ("restart-policy", edit(lambda m: roles(m)["Worker"].update(restartPolicy="never")),
     "manifest_invalid_restart_policy", f"{RS}/Worker/restartPolicy", E),
    # ascendjob_validate.go:40-46, scaling/controller.go:51-66
    ("scaling-without-job-id",
     edit(lambda m: m["metadata"]["labels"].update({"mind-cluster/scaling-rule": "r",
                                                    "mind-cluster/group-name": "g"})),
     "manifest_scaling_label_missing", "manifest:/metadata/labels/jobID", E),
    # ascendjob_validate.go:48-54, utils/job_v2.go:53-63 (26.0+)
    ("bad-scale-out-type", edit(lambda m: m["metadata"]["labels"].update({"scaleout-type": "roc"})),
     "manifest_invalid_scale_out_type", "manifest:/metadata/labels/scaleout-type", E),
]
# fmt: on


@pytest.mark.parametrize(
    ("manifest", "code", "field", "severity"),
    [r[1:] for r in MANIFEST_ROWS],
    ids=[r[0] for r in MANIFEST_ROWS],
)
def test_manifest_rule(manifest: Any, code: str, field: str, severity: str) -> None:
    found = [(i.code, i.field, i.severity) for i in validate_manifest(manifest)]
    assert (code, field, severity) in found, found


@pytest.mark.parametrize("framework", ["pytorch", "mindspore", "tensorflow"])
def test_valid_manifests_have_no_issues(framework: str) -> None:
    assert validate_manifest(ascendjob(framework)) == ()


def test_mindspore_without_scheduler_is_fine_with_one_npu() -> None:
    manifest = edit(lambda m: m["spec"]["replicaSpecs"].pop("Scheduler"), "mindspore", workers=1, npus=1)
    assert validate_manifest(manifest) == ()


def test_leader_replicas_unset_defaults_to_one() -> None:
    manifest = edit(lambda m: m["spec"]["replicaSpecs"]["Master"].pop("replicas"))
    assert validate_manifest(manifest) == ()


def _sample(shared_dir: Path, name: str) -> dict[str, Any]:
    docs = list(yaml.safe_load_all((shared_dir / "reference" / "samples" / name).read_text(encoding="utf-8")))
    return next(d for d in docs if isinstance(d, dict) and d.get("kind") == "AscendJob")


def test_real_samples(shared_dir: Path) -> None:
    assert validate_manifest(_sample(shared_dir, "multi_node_schedule-job_kwok_simulator-8x8.yaml")) == ()
    assert validate_manifest(_sample(shared_dir, "multi_pod_schedule-job_llama-2x16.yaml")) == ()
    issues = validate_manifest(_sample(shared_dir, "training_910b-job_llama-2x8.yaml"))
    broken = {(i.code, i.field) for i in issues}
    assert broken == {
        ("manifest_empty_name", "manifest:/metadata/name"),
        ("manifest_leader_replicas", "manifest:/spec/replicaSpecs/Master/replicas"),
    }


def test_sample_job_context_drives_policy_rules(shared_dir: Path) -> None:
    """The 1x8 sample uses hostNetwork, so fault_scheduling force (what its labels say) is an error."""
    context = JobContext.from_manifest(_sample(shared_dir, "training_910b-job_llama-1x8.yaml"))
    result = validate_policy({"strategies": "recover", "fault_scheduling": "force"}, context)
    assert "force_with_host_network" in {i.code for i in result.errors}
    assert validate_policy({"strategies": "recover"}, context).ok


# --- contracts -----------------------------------------------------------------------------------
def test_every_code_is_catalogued_and_exercised() -> None:
    emitted = {code for *_, code, _, _ in POLICY_ROWS} | {row[2] for row in MANIFEST_ROWS}
    catalogue = codes()
    assert emitted <= set(catalogue)
    assert set(catalogue) - emitted == {"internal_error"}, "every code needs a table row"
    assert all(desc.strip() and desc.endswith(".") for desc in catalogue.values())


def test_every_issue_in_the_tables_uses_a_catalogued_code() -> None:
    for _, policy, context, *_ in POLICY_ROWS:
        assert {i.code for i in issues_of(validate_policy(policy, context))} <= set(codes())
    for _, manifest, *_ in MANIFEST_ROWS:
        assert {i.code for i in validate_manifest(manifest)} <= set(codes())


def test_messages_list_the_allowed_values() -> None:
    for _, policy, context, *_ in POLICY_ROWS:
        for issue in issues_of(validate_policy(policy, context)):
            if issue.code == "out_of_range":
                low, high = issue.allowed or []
                assert str(low) in issue.message and str(high) in issue.message, issue
            if issue.code in ("invalid_choice", "unsupported_release"):
                assert issue.allowed and all(str(v) in issue.message for v in issue.allowed), issue
            if issue.code in ("unknown_field", "invalid_choice", "unknown_strategy", "strategy_wrong_case"):
                assert issue.allowed, issue


@pytest.mark.parametrize(
    ("policy", "hint"),
    [
        ({"strategies": ["recovery"]}, 'Did you mean "recover"?'),
        ({"strategies": ["recover in place"]}, 'Did you mean "recover-in-place"?'),
        ({"strategies": ["elastic_training"]}, 'Did you mean "elastic-training"?'),
        ({"strategies": ["Retry"]}, 'Write "retry".'),
        ({"strategies": [" recover"]}, 'Write "recover".'),
        ({"fault_scheduling": "Grace"}, 'Did you mean "grace"?'),
        ({"strategys": []}, 'Did you mean "strategies"?'),
        ({"timeout_s": 30}, 'Did you mean "decision_timeout_s"?'),
    ],
)
def test_did_you_mean(policy: dict[str, Any], hint: str) -> None:
    messages = [i.message for i in validate_policy(policy).errors]
    assert any(hint in m for m in messages), messages


def test_unknown_field_lists_the_fields() -> None:
    (issue,) = validate_policy({"strategy": "recover"}).errors
    assert issue.allowed is not None
    assert "strategies" in issue.allowed and "mindcluster_version" in issue.allowed


def test_elastic_on_old_release_explains_the_fallback() -> None:
    (issue,) = validate_policy({"mindcluster_version": "7.1", "strategies": ["elastic-training"]}).errors
    assert issue.message == (
        "elastic-training needs MindCluster 7.2 or newer; this policy targets 7.1, where ClusterD ignores it "
        "and the job falls back to slower recovery."
    )
    assert issue.allowed == ["retry", "recover-in-place", "recover", "dump", "exit"]


def test_defaults_for_an_empty_policy() -> None:
    result = validate_policy({})
    assert result.ok and result.spec == PolicySpec() and not result.warnings


def test_canonical_spec_sorts_strategies_by_clusterd_priority() -> None:
    shuffled = ["exit", "dump", "elastic-training", "recover", "recover-in-place", "retry"]
    result = validate_policy({"strategies": shuffled})
    assert result.spec is not None
    assert result.spec.strategies == STRATEGIES
    assert result.spec.strategy_annotation == "retry,recover-in-place,recover,elastic-training,dump,exit"
    assert result.to_dict()["spec"]["strategies"] == list(STRATEGIES)


def test_string_and_list_strategies_normalise_the_same() -> None:
    from_string = validate_policy({"strategies": "dump,recover,retry"})
    from_list = validate_policy({"strategies": ["retry", "dump", "recover"]})
    assert from_string.spec is not None and from_string.spec == from_list.spec
    assert validate_policy({"strategies": ""}).spec == validate_policy({"strategies": []}).spec


@pytest.mark.parametrize(
    ("spelling", "release"),
    [
        ("7.3.0", "7.3"),
        ("7.1.RC1", "7.1"),
        ("7.1.rc1", "7.1"),
        ("7.0.RC1", "7.0"),
        ("7.2RC1", "7.2"),
        ("26.1.0", "26.1"),
        ("v26.0.0", "26.0"),
        (" 7.3 ", "7.3"),
        (7.3, "7.3"),
        (26.1, "26.1"),
        ("26.1", "26.1"),
    ],
)
def test_release_spellings_normalise(spelling: Any, release: str) -> None:
    result = validate_policy({"mindcluster_version": spelling})
    assert result.spec is not None and result.spec.mindcluster_version == release


def test_unsupported_release_lists_the_releases() -> None:
    (issue,) = validate_policy({"mindcluster_version": "6.0.0"}).errors
    assert issue.allowed == list(RELEASES)


def test_rules_object_shape_folds_into_canonical_shape() -> None:
    rules = [{"match": {"fault_type": "uce", "rank0": False}, "strategy": "retry"}, {"strategy": "ask"}]
    folded = validate_policy(
        {
            "platform_mode": True,
            "strategies": ["retry", "recover"],
            "decision_rules": {"rules": rules, "default_strategy": "retry", "timeout_s": 120},
        }
    )
    assert folded.spec is not None
    assert folded.spec.decision_timeout_s == 120 and folded.spec.default_strategy == "retry"
    assert folded.spec.decision_rules[0].match == {"fault_type": ["uce"], "rank0": False}
    canonical = folded.spec.to_dict()
    assert validate_policy(canonical).spec == folded.spec
    assert canonical["decision_rules"][1] == {"match": {}, "strategy": "ask"}


def test_issue_and_result_serialise_to_json() -> None:
    result = validate_policy({"fault_scheduling": "sometimes", "strategies": ["dump", "dump"]})
    data = json.loads(json.dumps(result.to_dict()))
    assert data["valid"] is False and data["spec"] is None
    (error,) = data["errors"]
    assert error == {
        "code": "invalid_choice",
        "field": "/fault_scheduling",
        "message": error["message"],
        "allowed": ["grace", "force", "off"],
        "severity": "error",
    }
    assert data["warnings"][0]["code"] == "duplicate_strategy"
    assert "allowed" not in Issue("x", "/", "m").to_dict()


def test_duplicates_are_only_a_warning_and_still_produce_a_spec() -> None:
    result = validate_policy({"strategies": "recover,recover"})
    assert result.ok and result.spec is not None and result.spec.strategies == ("recover",)
    assert [w.code for w in result.warnings] == ["duplicate_strategy"]


def test_every_offending_replica_is_named() -> None:
    context = job(restart="OnFailure")
    messages = [i.message for i in validate_policy({"fault_retry_times": 1}, context).errors]
    assert len(messages) == 2 and "Master" in messages[0] and "Worker" in messages[1]

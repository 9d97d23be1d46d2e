"""``mindcluster.operator_validation``: the ascend-operator's ``validateJob`` as a pure function.

Paths are in Ascend/mind-cluster ``component/ascend-operator/pkg/controllers/v1/``.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mindcluster import operator_validation as v


def _job(framework: str = "pytorch") -> dict[str, Any]:
    ascend = {
        "name": "ascend",
        "image": "train:1",
        "resources": {"requests": {"huawei.com/Ascend910": "8"}},
    }
    leader = {"pytorch": "Master", "mindspore": "Scheduler", "tensorflow": "Chief"}[framework]
    pod = {"template": {"spec": {"containers": [ascend]}}}
    return {
        "metadata": {"name": "j", "labels": {"framework": framework}},
        "spec": {
            "runPolicy": {"schedulingPolicy": {"queue": "default"}},
            "replicaSpecs": {leader: {"replicas": 1, **copy.deepcopy(pod)}, "Worker": {"replicas": 2, **pod}},
        },
    }


def _reason(job: dict[str, Any], queue_error: v.QueueLookup | None = None) -> str | None:
    failure = v.validate_job(job, queue_error)
    return failure.reason if failure else None


@pytest.mark.parametrize("framework", ["pytorch", "mindspore", "tensorflow"])
def test_a_well_formed_job_passes(framework: str) -> None:
    assert v.validate_job(_job(framework), lambda queue: None) is None


def test_missing_replica_specs_is_invalid_specs_ascendjob_validate_go_65_70() -> None:
    job = _job()
    del job["spec"]["replicaSpecs"]
    failure = v.validate_job(job)
    assert failure == v.ValidationFailure("InvalidSpecs", "replicaSpecs is not set, please modify your job")
    assert failure.condition_message == "InvalidSpecs: replicaSpecs is not set, please modify your job"


def test_success_policy_outside_default_and_all_workers_ascendjob_validate_go_72_79() -> None:
    job = _job()
    job["spec"]["successPolicy"] = "AnyWorker"
    assert _reason(job) == "InvalidSuccessPolicy"
    job["spec"]["successPolicy"] = "AllWorkers"
    assert _reason(job) is None


def test_queue_is_checked_only_with_gang_scheduling_ascendjob_validate_go_81_89() -> None:
    job = _job()
    job["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = "gold"
    failure = v.validate_job(job, lambda queue: f'queues "{queue}" not found')
    assert failure is not None and failure.reason == "InvalidQueue"
    assert failure.message == 'check queue<gold> failed, err: queues "gold" not found, maybe it is not create'
    assert v.validate_job(job) is None  # EnableGangScheduling off: no lookup


def test_basic_info_runs_before_the_framework_ascendjob_validate_go_56_61() -> None:
    job = _job()
    job["metadata"]["labels"]["framework"] = "caffe"
    assert _reason(job, lambda queue: "not found") == "InvalidQueue"
    assert _reason(job) == "InvalidFramework"


def test_framework_label_missing_or_unknown_api_v1_defaults_go_133_147() -> None:
    job = _job()
    job["metadata"]["labels"]["framework"] = "caffe"
    failure = v.validate_job(job)
    assert failure is not None
    assert failure.message == "framework label<caffe> is not in map[mindspore:{} pytorch:{} tensorflow:{}]"
    del job["metadata"]["labels"]["framework"]
    assert _reason(job) == "InvalidFramework"


def test_replica_type_of_another_framework_ascendjob_validate_go_246_258() -> None:
    job = _job("pytorch")
    job["spec"]["replicaSpecs"]["Chief"] = job["spec"]["replicaSpecs"].pop("Master")
    failure = v.validate_job(job)
    assert failure == v.ValidationFailure(
        "InvalidReplicaType", "replicaType is Chief but must be one of [Master Worker]"
    )


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda spec: spec.update(replicas=-1), "InvalidReplicaSpec"),  # :126-132
        (lambda spec: spec.update(replicas=20001), "InvalidReplicaSpec"),  # :133-139, consts.go:129
        (lambda spec: spec["template"]["spec"].update(containers=[]), "InvalidReplicaSpec"),  # :112-120
        (
            lambda spec: spec["template"]["spec"]["containers"][0].update(image=""),
            "InvalidContainer",
        ),  # :202-208
        (
            lambda spec: spec["template"]["spec"]["containers"][0].update(name="main"),
            "InvalidContainer",
        ),  # :217-221
    ],
)
def test_per_replica_checks_ascendjob_validate_go_143_194(change: Any, reason: str) -> None:
    job = _job()
    change(job["spec"]["replicaSpecs"]["Worker"])
    assert _reason(job) == reason


def test_a_leader_must_have_one_replica_ascendjob_validate_go_260_268() -> None:
    job = _job()
    job["spec"]["replicaSpecs"]["Master"]["replicas"] = 2
    failure = v.validate_job(job)
    assert failure == v.ValidationFailure(
        "InvalidReplicaSpec", "Master replicaSpec is not valid, the replicas must be only 1"
    )


def test_no_leader_ascendjob_validate_go_177_191() -> None:
    pytorch = _job("pytorch")
    del pytorch["spec"]["replicaSpecs"]["Master"]
    assert _reason(pytorch) == "InvalidReplicaType"
    mindspore = _job("mindspore")
    del mindspore["spec"]["replicaSpecs"]["Scheduler"]
    assert _reason(mindspore) == "InvalidReplicaSpec"  # 2 workers x 8 NPUs > 1 (:185-190)
    worker = mindspore["spec"]["replicaSpecs"]["Worker"]
    worker["replicas"] = 1
    worker["template"]["spec"]["containers"][0]["resources"] = {"requests": {"huawei.com/Ascend910": "1"}}
    assert _reason(mindspore) is None  # a single-NPU MindSpore job needs no Scheduler


def test_reasons_are_the_operator_constants_consts_go_146_155() -> None:
    assert v.REASONS == (
        "InvalidScalingConfig",
        "InvalidScaleOutConfig",
        "InvalidSpecs",
        "InvalidSuccessPolicy",
        "InvalidQueue",
        "InvalidFramework",
        "InvalidReplicaType",
        "InvalidReplicaSpec",
        "InvalidContainer",
    )


# --- the label checks before validateBasicInfo (:40-54) ------------------------------------------
SCALING = {"mind-cluster/scaling-rule": "rule-a", "mind-cluster/group-name": "g1", "jobID": "job-7"}


def test_a_valid_scaling_config_passes_scaling_controller_go_51_66() -> None:
    job = _job()
    job["metadata"]["labels"].update(SCALING)
    assert v.validate_job(job) is None
    # Without the rule label the group and jobID labels are not looked at (controller.go:52-55).
    job = _job()
    job["metadata"]["labels"]["jobID"] = "job-7"
    assert v.validate_job(job) is None


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        # scaling/controller.go:57-60
        (
            "mind-cluster/group-name",
            "job j has no group name, please set label of mind-cluster/group-name=<the group of job>",
        ),
        # scaling/controller.go:62-65
        ("jobID", "job j has no jobID, please set label of jobID=<the jobID of job>"),
    ],
)
def test_scaling_rule_needs_group_and_job_id_ascendjob_validate_go_40_46(missing: str, message: str) -> None:
    job = _job()
    job["metadata"]["labels"].update(SCALING)
    del job["metadata"]["labels"][missing]
    job["metadata"]["labels"]["framework"] = "caffe"  # checked first (:40), before the framework (:60)
    assert v.validate_job(job) == v.ValidationFailure("InvalidScalingConfig", message)


def test_an_empty_scaling_rule_still_asks_for_the_group_scaling_controller_go_52_55() -> None:
    # Go tests the key's presence (`_, ok := job.Labels[...]`), not its value.
    job = _job()
    job["metadata"]["labels"]["mind-cluster/scaling-rule"] = ""
    assert _reason(job) == "InvalidScalingConfig"
    job["metadata"]["labels"].update({"mind-cluster/group-name": "", "jobID": ""})
    assert _reason(job) is None


@pytest.mark.parametrize("value", ["ROCE", "UBOE", "roce", "UBoE", "", "   "])
def test_scale_out_type_accepted_values_utils_job_v2_go_53_63(value: str) -> None:
    # Upper-cased (job_v2.go:17-24); blank or absent means "not set" (:55-57).
    job = _job()
    job["metadata"]["labels"]["scaleout-type"] = value
    assert v.validate_job(job) is None


@pytest.mark.parametrize("value", ["IB", " ROCE"])  # not trimmed before the comparison (job_v2.go:58)
def test_scale_out_type_refused_without_an_event_ascendjob_validate_go_48_54(value: str) -> None:
    job = _job()
    job["metadata"]["labels"].update({"scaleout-type": value, "mind-cluster/scaling-rule": "r"})
    assert _reason(job) == "InvalidScalingConfig"  # the scaling check runs first (:40-46)
    del job["metadata"]["labels"]["mind-cluster/scaling-rule"]
    job["spec"]["successPolicy"] = "AnyWorker"  # and the scale-out one before validateBasicInfo (:56)
    failure = v.validate_job(job)
    assert failure == v.ValidationFailure(
        "InvalidScaleOutConfig",
        "the value of label scaleout-type is invalid, which should be ROCE or UBOE",
        records_event=False,
    )
    assert failure.sets_condition and not failure.records_event

"""D14: before v26.0.0 the operator's validateJob gives other reasons and messages, checks a replica
type after its containers, wants an image in every container, and sets no condition. Read at
Ascend/mind-cluster v7.3.0 (identical at v7.2.RC1 and v7.3.2),
component/ascend-operator/pkg/controllers/v1/ascendjob_validate.go:24-262 and
ascendjob_controller.go:148-151."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mindcluster import keys as k
from mindcluster import operator_validation as v
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.sim import event_reasons, make_job

LEGACY = "7.3"


def _job() -> dict[str, Any]:
    ascend = {"name": "ascend", "image": "train:1", "resources": {"requests": {"huawei.com/Ascend910": "8"}}}
    pod = {"template": {"spec": {"containers": [ascend]}}}
    return {
        "metadata": {"name": "j", "labels": {"framework": "pytorch"}},
        "spec": {
            "replicaSpecs": {
                "Master": {"replicas": 1, **copy.deepcopy(pod)},
                "Worker": {"replicas": 2, **pod},
            }
        },
    }


def _broken(change: str) -> dict[str, Any]:
    job = _job()
    specs = job["spec"]["replicaSpecs"]
    if change == "no-specs":
        del job["spec"]["replicaSpecs"]
    elif change == "no-framework":
        del job["metadata"]["labels"]["framework"]
    elif change == "two-masters":
        specs["Master"]["replicas"] = 2
    elif change == "sidecar-without-image":
        specs["Worker"]["template"]["spec"]["containers"].append({"name": "log"})
    elif change == "bad-type-without-containers":
        specs["Launcher"] = {"template": {"spec": {"containers": []}}}
    elif change == "no-leader":
        del specs["Master"]
    return job


@pytest.mark.parametrize(
    ("change", "legacy", "named"),
    [
        # :55-61 vs v26 :64-70
        ("no-specs", ("SpecsError", "job spec is not valid"), "InvalidSpecs"),
        # api/v1/defaults.go:136 at v7.3.0: no hint
        ("no-framework", ("FrameworkLabelError", "framework label is not set"), "InvalidFramework"),
        # validateLeader :249-257
        (
            "two-masters",
            ("ReplicaTypeError", "replicaType<Master> replicas is invalid, it must be only 1"),
            "InvalidReplicaSpec",
        ),
        # validateContainer :186-196: any container without an image (v26 looks at ascend only)
        (
            "sidecar-without-image",
            ("ContainerError", "replicaType is not valid: Image is undefined in the container of Worker"),
            None,
        ),
        # checkReplicaSpecs :134-152: containers before the replica type (v26: the type first)
        (
            "bad-type-without-containers",
            ("ReplicaTypeError", "jobSpec is not valid: containers definition expected in Launcher"),
            "InvalidReplicaType",
        ),
        # :166-173
        (
            "no-leader",
            ("ReplicaTypeError", "ReplicaType is not valid: there need 1 leader replica-type"),
            "InvalidReplicaType",
        ),
    ],
)
def test_legacy_reasons_and_messages(change: str, legacy: tuple[str, str], named: str | None) -> None:
    failure = v.validate_job(_broken(change), release=LEGACY)
    assert failure is not None and (failure.reason, failure.message) == legacy
    assert failure.sets_condition is False
    current = v.validate_job(_broken(change), release="26.0")
    assert (current.reason if current else None) == named
    assert current is None or current.sets_condition


def test_legacy_queue_message_is_the_lookup_error() -> None:
    # :70-79: QueueGetFailed with err.Error() as the message.
    job = _job()
    job["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": "nope"}}
    failure = v.validate_job(job, lambda q: f'queues.scheduling.volcano.sh "{q}" not found', release=LEGACY)
    assert failure == v.ValidationFailure(
        "QueueGetFailed", 'queues.scheduling.volcano.sh "nope" not found', False
    )


def test_the_simulated_operator_writes_the_legacy_event_and_no_condition(sim: SimCluster, kube: Kube) -> None:
    manifest = make_job("legacy-invalid", release=LEGACY)
    del manifest["metadata"]["labels"]["framework"]
    kube.custom.create_namespaced_custom_object(
        k.ASCENDJOB_GROUP, k.ASCENDJOB_VERSION, "default", k.ASCENDJOB_PLURAL, manifest
    )
    job = wait_for(lambda: kube.get_job("default", "legacy-invalid"), what="the job stored")
    wait_for(lambda: "FrameworkLabelError" in event_reasons(kube, job), what="the legacy Warning Event")
    job = kube.get_job("default", "legacy-invalid")
    conditions = ((job or {}).get("status") or {}).get("conditions") or []
    assert not any(c.get("reason") == v.CONDITION_REASON_JOB_VALID_FAILED for c in conditions)


def test_legacy_scaling_config_reason_and_short_messages() -> None:
    # v7.3.0 ascendjob_validate.go:39-45 and scaling/controller.go:57-65: no "please set label" hint.
    job = _job()
    job["metadata"]["labels"]["mind-cluster/scaling-rule"] = "rule-a"
    failure = v.validate_job(job, release=LEGACY)
    assert failure == v.ValidationFailure("invalid scaling config", "job j has no group name", False)
    job["metadata"]["labels"]["mind-cluster/group-name"] = "g1"
    failure = v.validate_job(job, release=LEGACY)
    assert failure == v.ValidationFailure("invalid scaling config", "job j has no jobID", False)
    job["metadata"]["labels"]["jobID"] = "job-7"
    assert v.validate_job(job, release=LEGACY) is None  # a valid scaling config passes


def test_legacy_operator_ignores_scale_out_type() -> None:
    # v7.3.0 validateJob (:24-52) has no scale-out check; it arrived with v26.0.0.
    job = _job()
    job["metadata"]["labels"]["scaleout-type"] = "IB"
    assert v.validate_job(job, release=LEGACY) is None
    assert v.validate_job(job, release="26.0") is not None

"""The product's ``validate_manifest`` never lets through a job the ascend-operator refuses.

Two implementations on purpose: the product reports every problem up front, in its own words;
``mindcluster.operator_validation`` is the operator's ``validateJob`` (ascendjob_validate.go:25-62)
that the simulated operator runs. For each broken manifest the operator rejects, the product must
report at least one error; for the well-formed ones, neither complains.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from apps.policies.validation import validate_manifest
from mindcluster.operator_validation import validate_job
from tests.support.sim import make_job

Change = Callable[[dict[str, Any]], None]


def _worker(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["replicaSpecs"]["Worker"]


def _ascend(job: dict[str, Any]) -> dict[str, Any]:
    return _worker(job)["template"]["spec"]["containers"][0]


def _drop_leader(job: dict[str, Any]) -> None:
    specs = job["spec"]["replicaSpecs"]
    del specs[next(role for role in specs if role != "Worker")]


# (id, framework, change, reason the operator gives)
BROKEN: list[tuple[str, str, Change, str]] = [
    ("no-replica-specs", "pytorch", lambda j: j["spec"].pop("replicaSpecs"), "InvalidSpecs"),  # :65-70
    ("success-policy", "pytorch", lambda j: j["spec"].update(successPolicy="Any"), "InvalidSuccessPolicy"),
    ("no-framework", "pytorch", lambda j: j["metadata"]["labels"].pop("framework"), "InvalidFramework"),
    (
        "bad-framework",
        "pytorch",
        lambda j: j["metadata"]["labels"].update(framework="caffe"),
        "InvalidFramework",
    ),
    (
        "foreign-role",
        "pytorch",
        lambda j: j["spec"]["replicaSpecs"].update(Chief=j["spec"]["replicaSpecs"].pop("Master")),
        "InvalidReplicaType",
    ),  # :246-258
    ("negative-replicas", "pytorch", lambda j: _worker(j).update(replicas=-1), "InvalidReplicaSpec"),
    ("too-many-replicas", "mindspore", lambda j: _worker(j).update(replicas=20001), "InvalidReplicaSpec"),
    (
        "no-containers",
        "pytorch",
        lambda j: _worker(j)["template"]["spec"].update(containers=[]),
        "InvalidReplicaSpec",
    ),
    (
        "two-leaders",
        "tensorflow",
        lambda j: j["spec"]["replicaSpecs"]["Chief"].update(replicas=2),
        "InvalidReplicaSpec",
    ),  # :260-268
    ("no-image", "pytorch", lambda j: _ascend(j).update(image=""), "InvalidContainer"),  # :202-208
    ("no-ascend-container", "mindspore", lambda j: _ascend(j).update(name="main"), "InvalidContainer"),
    ("leaderless-pytorch", "pytorch", _drop_leader, "InvalidReplicaType"),  # :177-184
    ("leaderless-mindspore-8-npus", "mindspore", _drop_leader, "InvalidReplicaSpec"),  # :185-190
    # :40-46, scaling/controller.go:51-66
    (
        "scaling-without-group",
        "pytorch",
        lambda j: j["metadata"]["labels"].update({"mind-cluster/scaling-rule": "r", "jobID": "7"}),
        "InvalidScalingConfig",
    ),
    (
        "scaling-without-job-id",
        "mindspore",
        lambda j: j["metadata"]["labels"].update(
            {"mind-cluster/scaling-rule": "r", "mind-cluster/group-name": "g"}
        ),
        "InvalidScalingConfig",
    ),
    # :48-54, utils/job_v2.go:53-63
    (
        "bad-scale-out-type",
        "tensorflow",
        lambda j: j["metadata"]["labels"].update({"scaleout-type": "IB"}),
        "InvalidScaleOutConfig",
    ),
]


@pytest.mark.parametrize(
    ("framework", "change", "reason"), [row[1:] for row in BROKEN], ids=[r[0] for r in BROKEN]
)
def test_what_the_operator_refuses_the_product_reports(framework: str, change: Change, reason: str) -> None:
    job = make_job("agree", framework=framework)
    change(job)
    failure = validate_job(copy.deepcopy(job))
    assert failure is not None and failure.reason == reason
    errors = [issue for issue in validate_manifest(job) if issue.severity == "error"]
    assert errors, f"the operator refuses it ({failure.reason}: {failure.message}); the product said nothing"


@pytest.mark.parametrize("framework", ["pytorch", "mindspore", "tensorflow"])
def test_a_well_formed_job_passes_both(framework: str) -> None:
    job = make_job("agree", framework=framework, workers=2)
    assert validate_job(job) is None
    assert [issue for issue in validate_manifest(job) if issue.severity == "error"] == []


@pytest.mark.parametrize(
    "labels",
    [
        {"mind-cluster/scaling-rule": "r", "mind-cluster/group-name": "g", "jobID": "7"},
        {"scaleout-type": "roce"},
        {"scaleout-type": "UBOE"},
        {"scaleout-type": ""},
    ],
)
def test_valid_scaling_and_scale_out_labels_pass_both(labels: dict[str, str]) -> None:
    job = make_job("agree")
    job["metadata"]["labels"].update(labels)
    assert validate_job(copy.deepcopy(job)) is None
    assert [issue for issue in validate_manifest(job) if issue.severity == "error"] == []

"""The operator's env rules (``mindcluster.operator_env``) against the Go source, and the renderer
and the simulated operator reading the same table (Ascend/mind-cluster @ 22bb3d98).

``component/ascend-operator/pkg/controllers/v1/env.go`` is cited per row.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apps.policies.desired import desired_state
from apps.policies.validation import validate_policy
from mindcluster import keys as k
from mindcluster.operator_env import STRATEGY_ENV, operator_injects_env, process_recover_env
from mindcluster.releases import RELEASES
from simcluster.operator import PodSlot, injected_env

ON = {k.ENV_PROCESS_RECOVER: "on", k.ENV_ELASTIC_PROCESS_RECOVER_ENABLE: "1"}


def test_each_strategy_sets_the_env_of_its_go_helper() -> None:
    # component/ascend-operator/pkg/controllers/v1/env.go:419-431 addRecoverEnv; :410-411 exit → recover
    assert STRATEGY_ENV["recover"].env == ON and STRATEGY_ENV["exit"].env == ON
    assert STRATEGY_ENV["recover"].tokens("mindspore") == ("ARF:1",)
    # env.go:433-446 addRetryEnv: UCE and HCCE for MindSpore
    assert STRATEGY_ENV["retry"].tokens("mindspore") == ("UCE:1", "HCCE:1")
    # env.go:448-461 addRecoverInPlaceEnv: also ENABLE_RESTART_FAULT_PROCESS, and the "recover" token
    assert STRATEGY_ENV["recover-in-place"].env == {**ON, k.ENV_ENABLE_RESTART_FAULT_PROCESS: "on"}
    assert STRATEGY_ENV["recover-in-place"].tokens("pytorch") == ("recover",)
    # env.go:463-475 addDumpEnv
    assert STRATEGY_ENV["dump"].tokens("mindspore") == ("TTP:1",)
    # env.go:477-488 addElasticTrainingEnv: PyTorch only, no ELASTIC_PROCESS_RECOVER_ENABLE
    assert STRATEGY_ENV["elastic-training"].env == {k.ENV_PROCESS_RECOVER: "on"}
    assert STRATEGY_ENV["elastic-training"].tokens("mindspore") is None


def _job(framework: str, release: str, strategies: str) -> dict[str, Any]:
    container = {
        "name": k.CONTAINER_NAME,
        "image": "train:1",
        "resources": {"requests": {"huawei.com/Ascend910": 8}, "limits": {"huawei.com/Ascend910": 8}},
    }
    return {
        "apiVersion": k.ASCENDJOB_API_VERSION,
        "kind": k.ASCENDJOB_KIND,
        "metadata": {
            "name": "job",
            "namespace": "ns",
            "uid": "uid-1",
            "labels": {k.LABEL_FRAMEWORK: framework, k.LABEL_RELEASE: release},
            "annotations": {k.ANNOTATION_RECOVER_STRATEGY: strategies},
        },
        "spec": {
            "replicaSpecs": {
                role: {"replicas": 1, "template": {"spec": {"containers": [copy.deepcopy(container)]}}}
                for role in ("Master", "Worker")
            }
        },
    }


def test_addenvbystrategy_ignores_unknown_names_and_does_not_trim() -> None:
    # env.go:379-381 splits on "," without trimming; :414-416 ignores what it does not know.
    env = process_recover_env(_job("pytorch", "26.1", "retry, dump"), "26.1")
    assert env["HIGH_AVAILABILITY"] == "retry"


@pytest.mark.parametrize("release", RELEASES)
def test_process_recover_env_is_set_once_by_the_renderer_or_by_the_operator(release: str) -> None:
    """Up to 7.1 the renderer writes it into the template; from 7.2 only the operator injects it."""
    raw = {"mindcluster_version": release, "strategies": ["recover"]}
    spec = validate_policy(raw).spec
    assert spec is not None
    rendered = desired_state(_job("pytorch", release, "recover"), spec, 1).manifest
    worker = rendered["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    from_template = [e["name"] for e in worker.get("env") or []]
    from_operator = [e["name"] for e in injected_env(rendered, PodSlot("Worker", 0, 1), "127.0.0.1")]
    names = from_template + from_operator
    assert names.count(k.ENV_PROCESS_RECOVER) == 1, (release, from_template, from_operator)
    assert (k.ENV_PROCESS_RECOVER in from_operator) == operator_injects_env(release)

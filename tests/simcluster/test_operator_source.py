"""The simulated Ascend operator against the real source (Ascend/mind-cluster @ 22bb3d98, facts §1, §4).

Each test cites the ``component/ascend-operator/pkg/controllers/v1/...go:LINE`` it encodes (line numbers
at that commit; release-specific lines name the tag).
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from mindcluster import keys as k
from simcluster.operator import (
    PodSlot,
    backoff_limit_at_creation,
    build_podgroup,
    injected_env,
    read_backoff_limit,
)
from tests.support import wait_for
from tests.support.sim import conditions, create_job, event_reasons, make_job, podgroup_of


def _env(manifest: dict, *, role: str = "Worker", framework_uid: str = "uid-1") -> dict[str, str]:
    manifest["metadata"]["uid"] = framework_uid
    out: dict[str, str] = {}
    for entry in injected_env(manifest, PodSlot(role, 0, 1), "127.0.0.1"):
        out[entry["name"]] = entry["value"]
    return out


def _names(manifest: dict) -> list[str]:
    manifest["metadata"]["uid"] = "uid-1"
    return [e["name"] for e in injected_env(manifest, PodSlot("Worker", 0, 1), "127.0.0.1")]


# --- env (env.go) -------------------------------------------------------------------------------------
def test_pytorch_env_per_strategy_env_go_375_488() -> None:
    # env.go:382-385: HCCL_ASYNC_ERROR_HANDLING=0 and HIGH_AVAILABILITY = sorted set of tokens.
    env = _env(make_job("pt", strategies="retry,recover-in-place,dump,exit"))
    assert env["HIGH_AVAILABILITY"] == "dump,recover,retry"
    assert env["HCCL_ASYNC_ERROR_HANDLING"] == "0"
    assert env[k.ENV_PROCESS_RECOVER] == "on"
    assert env[k.ENV_ELASTIC_PROCESS_RECOVER_ENABLE] == "1"
    # env.go:448-461: recover-in-place adds ENABLE_RESTART_FAULT_PROCESS=on.
    assert env[k.ENV_ENABLE_RESTART_FAULT_PROCESS] == "on"
    assert k.ENV_ENABLE_RESTART_FAULT_PROCESS not in _env(make_job("pt2", strategies="recover"))


def test_elastic_training_alone_has_no_elastic_flag_env_go_477_488() -> None:
    env = _env(make_job("el", strategies="elastic-training"))
    assert env[k.ENV_PROCESS_RECOVER] == "on"
    assert env["HIGH_AVAILABILITY"] == "elastic-training"
    assert k.ENV_ELASTIC_PROCESS_RECOVER_ENABLE not in env


def test_unknown_or_spaced_names_still_set_high_availability_env_go_379_385_414() -> None:
    # strings.Split without TrimSpace: " recover" is unknown (default branch, env.go:414-416), yet the
    # PyTorch block always writes HIGH_AVAILABILITY (empty when no name was known).
    env = _env(make_job("sp", strategies="retry, recover"))
    assert env["HIGH_AVAILABILITY"] == "retry"
    env = _env(make_job("unk", strategies="bogus"))
    assert env["HIGH_AVAILABILITY"] == ""
    assert env["HCCL_ASYNC_ERROR_HANDLING"] == "0"
    assert k.ENV_PROCESS_RECOVER not in env


def test_no_annotation_no_recovery_env_env_go_367_373() -> None:
    names = _names(make_job("none", strategies=None))
    for name in ("HIGH_AVAILABILITY", "HCCL_ASYNC_ERROR_HANDLING", k.ENV_PROCESS_RECOVER):
        assert name not in names


@pytest.mark.parametrize(
    ("release", "tft"), [("7.2", "'{ARF:1,TTP:1}'"), ("7.3", "'{ARF:1,TTP:1}'"), ("26.0", "{ARF:1,TTP:1}")]
)
def test_mindspore_tft_quotes_by_release(release: str, tft: str) -> None:
    # v7.2.RC1 env.go:280 and v7.3.0 env.go:370 wrap in literal single quotes; env.go:390 does not.
    env = _env(
        make_job("ms", framework="mindspore", release=release, strategies="recover,dump"), role="Worker"
    )
    assert env["MS_ENABLE_TFT"] == tft
    assert env["MINDIO_FOR_MINDSPORE"] == "1"  # env.go:391
    assert env["MS_ENABLE_THM"] == "{HCCL_WATCHDOG:0}"  # env.go:392
    assert env[k.ENV_PROCESS_RECOVER] == "on"
    assert "HIGH_AVAILABILITY" not in env


def test_mindspore_pod_rescheduling_without_strategy_env_go_337_347() -> None:
    env = _env(make_job("msr", framework="mindspore", strategies=None, labels={"pod-rescheduling": "on"}))
    assert env["MS_ENABLE_TFT"] == "{RSC:1}"
    assert "MINDIO_FOR_MINDSPORE" not in env


def test_tensorflow_gets_no_recovery_env_env_go_274_313() -> None:
    names = _names(make_job("tf", framework="tensorflow", strategies="recover,retry"))
    for name in (
        "HIGH_AVAILABILITY",
        "MS_ENABLE_TFT",
        k.ENV_PROCESS_RECOVER,
        k.ENV_ELASTIC_PROCESS_RECOVER_ENABLE,
    ):
        assert name not in names
    assert k.ENV_MINDX_TASK_ID in names


def test_hot_switch_merges_from_73_env_go_349_365() -> None:
    env = _env(make_job("hs", strategies="retry", labels={k.LABEL_SUB_HEALTHY_STRATEGY: "hotSwitch"}))
    assert env["HIGH_AVAILABILITY"] == "recover,retry"  # merged, de-duplicated (env.go:42-92)
    names = _names(make_job("hs2", strategies="retry", labels={k.LABEL_SUB_HEALTHY_STRATEGY: "hotSwitch"}))
    assert Counter(names)[k.ENV_PROCESS_RECOVER] == 1
    ms = _env(
        make_job(
            "hs3",
            framework="mindspore",
            strategies="dump",
            labels={k.LABEL_SUB_HEALTHY_STRATEGY: "hotSwitch"},
        )
    )
    assert ms["MS_ENABLE_TFT"] == "{ARF:1,TTP:1}"


def test_hot_switch_72_appends_pytorch_only_v72_env_go_244_256() -> None:
    labels = {k.LABEL_SUB_HEALTHY_STRATEGY: "hotSwitch"}
    names = _names(make_job("hs72", release="7.2", strategies="retry", labels=labels))
    assert Counter(names)["HIGH_AVAILABILITY"] == 2  # plain addEnvValue in v7.2.RC1
    ms = _names(make_job("hs72m", framework="mindspore", release="7.2", strategies=None, labels=labels))
    assert "MS_ENABLE_TFT" not in ms


def test_common_env_task_id_and_replica_type_as_written_env_go_168_186() -> None:
    env = _env(make_job("common"), role="Master")
    assert env[k.ENV_MINDX_TASK_ID] == "uid-1"  # env.go:177, the job UID
    assert env["REPLICA_TYPE"] == "Master"  # env.go:182, string(pi.rtype), not lower-cased
    assert k.ENV_POD_IP not in env and k.ENV_TTP_PORT not in env
    # REPLICA_TYPE arrived in v26.0 (absent from v7.3.0 env.go setCommonEnv).
    assert "REPLICA_TYPE" not in _env(make_job("common73", release="7.3"), role="Master")


def test_nothing_before_72() -> None:
    names = _names(make_job("old", release="7.1", strategies="recover"))
    assert "HIGH_AVAILABILITY" not in names and k.ENV_PROCESS_RECOVER not in names


# --- PodGroup label (job.go) --------------------------------------------------------------------------
def test_podgroup_label_needs_annotation_presence_and_some_labels_job_go_479_491() -> None:
    job = make_job("pg", strategies="")  # present but empty still counts (job.go:489)
    job["metadata"]["uid"] = "u"
    assert build_podgroup(job)["metadata"]["labels"][k.LABEL_PROCESS_RECOVER_ENABLE] == "on"
    bare = make_job("pg2", strategies="recover")
    bare["metadata"]["uid"] = "u"
    bare["metadata"]["labels"] = {}
    assert build_podgroup(bare)["metadata"]["labels"] == {}  # pg.Labels == nil: job.go:480-482


def test_label_not_added_when_annotation_arrives_later_job_go_407_418(kube) -> None:
    job = create_job(kube, make_job("op-late", strategies=None))
    kube.custom.patch_namespaced_custom_object(
        k.ASCENDJOB_GROUP,
        k.ASCENDJOB_VERSION,
        "default",
        k.ASCENDJOB_PLURAL,
        "op-late",
        {"metadata": {"annotations": {k.ANNOTATION_RECOVER_STRATEGY: "recover"}}},
    )
    time.sleep(0.3)
    # SyncPodGroup returns an existing PodGroup untouched (job.go:412-414).
    pg = podgroup_of(kube, job)
    assert k.LABEL_PROCESS_RECOVER_ENABLE not in pg["metadata"]["labels"]
    assert k.ANNOTATION_RECOVER_STRATEGY not in pg["metadata"]["annotations"]


# --- create-time budget (ascendjob_controller.go) -----------------------------------------------------
def test_read_backoff_limit_ascendjob_controller_go_373_402() -> None:
    assert read_backoff_limit(make_job("a")) == -1  # unsetBackoffLimits, consts.go:117-118
    assert read_backoff_limit(make_job("b", labels={"fault-retry-times": "3"})) == 3
    # backoffLimit wins over the label (:375-377), even 0.
    assert read_backoff_limit(make_job("c", backoff_limit=5, labels={"fault-retry-times": "3"})) == 5
    assert read_backoff_limit(make_job("d", backoff_limit=0, labels={"fault-retry-times": "3"})) == 0
    assert read_backoff_limit(make_job("e", labels={"fault-retry-times": "+4"})) == 4  # strconv.Atoi
    for bad in ("x", " 3", "1_0", "3.0"):
        with pytest.raises(ValueError):
            read_backoff_limit(make_job("f", labels={"fault-retry-times": bad}))


def test_budget_is_read_at_creation_and_kept_across_patches(kube) -> None:
    job = create_job(kube, make_job("op-budget", labels={"fault-retry-times": "2"}))
    uid = job["metadata"]["uid"]
    assert backoff_limit_at_creation(uid) == 2
    kube.custom.patch_namespaced_custom_object(
        k.ASCENDJOB_GROUP,
        k.ASCENDJOB_VERSION,
        "default",
        k.ASCENDJOB_PLURAL,
        "op-budget",
        {"metadata": {"labels": {"fault-retry-times": "9"}}, "spec": {"runPolicy": {"backoffLimit": 7}}},
    )
    time.sleep(0.3)
    assert backoff_limit_at_creation(uid) == 2
    kube.custom.delete_namespaced_custom_object(
        k.ASCENDJOB_GROUP, k.ASCENDJOB_VERSION, "default", k.ASCENDJOB_PLURAL, "op-budget"
    )
    # onOwnerDeleteFunc forgets it (ascendjob_controller.go:404-420).
    wait_for(lambda: backoff_limit_at_creation(uid) is None, what="budget forgotten")


def test_non_numeric_fault_retry_times_drops_the_create_event_ascendjob_controller_go_377_380(kube) -> None:
    job = create_job(kube, make_job("op-badretry", labels={"fault-retry-times": "three"}), running=False)
    time.sleep(0.5)
    assert podgroup_of(kube, job) is None
    assert kube.list_job_pods("default", "op-badretry") == []
    assert conditions(kube.get_job("default", "op-badretry")) == []
    assert event_reasons(kube, job) == []
    assert backoff_limit_at_creation(job["metadata"]["uid"]) == -1  # set before parsing (:374)
    # Any later update enqueues the job; Reconcile then runs normally (no UpdateFunc predicate, :255-256).
    kube.custom.patch_namespaced_custom_object(
        k.ASCENDJOB_GROUP,
        k.ASCENDJOB_VERSION,
        "default",
        k.ASCENDJOB_PLURAL,
        "op-badretry",
        {"metadata": {"labels": {"touched": "yes"}}},
    )
    wait_for(lambda: "Running" in conditions(kube.get_job("default", "op-badretry")), what="reconciled")
    assert backoff_limit_at_creation(job["metadata"]["uid"]) == -1  # not re-read on update


# --- validation (ascendjob_validate.go) ---------------------------------------------------------------
def _failed(kube, manifest: dict) -> tuple[dict, list[str]]:
    create_job(kube, manifest, running=False)
    name = manifest["metadata"]["name"]
    job = wait_for(
        lambda: (lambda j: j if "Failed" in conditions(j) else None)(kube.get_job("default", name)),
        what=f"{name} Failed",
    )
    return job, event_reasons(kube, job)


def test_missing_containers_is_invalid_replica_spec_ascendjob_validate_go_112_120(kube) -> None:
    manifest = make_job("op-nocont")
    manifest["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"] = []
    job, reasons = _failed(kube, manifest)
    assert reasons == ["InvalidReplicaSpec"]
    assert job["status"]["conditions"][-1]["reason"] == "JobValidFailed"
    assert job["status"]["conditions"][-1]["message"].startswith("InvalidReplicaSpec: ")


def test_missing_leader_is_invalid_replica_type_ascendjob_validate_go_177_184(kube) -> None:
    manifest = make_job("op-noleader")
    del manifest["spec"]["replicaSpecs"]["Master"]
    _, reasons = _failed(kube, manifest)
    assert reasons == ["InvalidReplicaType"]


def test_missing_replica_specs_is_invalid_specs_ascendjob_validate_go_65_70(kube) -> None:
    manifest = make_job("op-nospecs")
    del manifest["spec"]["replicaSpecs"]
    _, reasons = _failed(kube, manifest)
    assert reasons == ["InvalidSpecs"]


def test_unknown_queue_is_invalid_queue_ascendjob_validate_go_81_89(kube) -> None:
    manifest = make_job("op-noqueue")
    manifest["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = "gold"
    job, reasons = _failed(kube, manifest)
    assert reasons == ["InvalidQueue"]
    assert "gold" in job["status"]["conditions"][-1]["message"]


def test_only_the_first_failure_is_reported_ascendjob_validate_go_56_61(kube) -> None:
    manifest = make_job("op-twoerrs", labels={"framework": "caffe"})
    manifest["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = "gold"
    _, reasons = _failed(kube, manifest)
    assert reasons == ["InvalidQueue"]  # validateBasicInfo runs before the framework check

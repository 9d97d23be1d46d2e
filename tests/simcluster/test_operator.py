"""The simulated Ascend operator (mindcluster.md §1.2-§1.4, §3.4), end to end through the emulator."""

from __future__ import annotations

from collections import Counter

from mindcluster import keys as k
from simcluster.operator import PodSlot, build_podgroup, injected_env, pod_slots
from tests.support import wait_for
from tests.support.sim import conditions, create_job, event_reasons, make_job, podgroup_of


def env_of(pod: dict) -> list[dict]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "ascend")["env"]


def env_names(pod: dict) -> list[str]:
    return [e["name"] for e in env_of(pod)]


def env_value(pod: dict, name: str) -> str | None:
    return next((e.get("value") for e in env_of(pod) if e["name"] == name), None)


def test_podgroup_copies_labels_and_annotations_and_sets_the_recover_label_from_72(kube) -> None:
    job = create_job(
        kube, make_job("op-pg-72", release="7.2", annotations={"custom": "x"}, labels={"team": "a"})
    )
    pg = podgroup_of(kube, job)
    assert pg is not None
    labels, annotations = pg["metadata"]["labels"], pg["metadata"]["annotations"]
    for key, value in job["metadata"]["labels"].items():
        assert labels[key] == value
    for key, value in job["metadata"]["annotations"].items():
        assert annotations[key] == value
    assert labels[k.LABEL_PROCESS_RECOVER_ENABLE] == "on"
    assert pg["spec"] == {"minMember": 2, "queue": "default"}
    assert pg["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    assert wait_for(lambda: (podgroup_of(kube, job) or {}).get("status", {}).get("phase") == "Running")


def test_no_automatic_recover_label_on_71(kube) -> None:
    job = create_job(kube, make_job("op-pg-71", release="7.1"))
    labels = podgroup_of(kube, job)["metadata"]["labels"]
    assert k.LABEL_PROCESS_RECOVER_ENABLE not in labels


def test_no_recover_label_without_recover_strategy(kube) -> None:
    job = create_job(kube, make_job("op-pg-none", strategies=None))
    assert k.LABEL_PROCESS_RECOVER_ENABLE not in podgroup_of(kube, job)["metadata"]["labels"]


def test_pods_carry_names_labels_rank_and_node(kube) -> None:
    job = create_job(kube, make_job("op-pods", workers=2))
    pods = kube.list_job_pods("default", "op-pods")
    assert [p["metadata"]["name"] for p in pods] == [
        "op-pods-master-0",
        "op-pods-worker-0",
        "op-pods-worker-1",
    ]
    for rank, pod in enumerate(pods):
        assert pod["metadata"]["annotations"]["hccl/rankIndex"] == str(rank)
        assert pod["metadata"]["labels"]["job-name"] == "op-pods"
        assert pod["metadata"]["labels"]["version"] == "0"
        assert pod["status"]["phase"] == "Running"
        assert pod["status"]["podIP"].startswith("10.0.")
        assert pod["spec"]["nodeName"].startswith("node-")
        assert env_value(pod, k.ENV_MINDX_TASK_ID) == job["metadata"]["uid"]
        assert env_value(pod, "RANK") == str(rank)
        assert env_value(pod, "WORLD_SIZE") == "24"
        assert env_value(pod, "LOCAL_WORLD_SIZE") == "8"
    assert [p["metadata"]["labels"]["replica-type"] for p in pods] == ["master", "worker", "worker"]


def test_recovery_env_is_injected_from_72_and_not_on_71(kube) -> None:
    create_job(kube, make_job("op-env-73", release="7.3", strategies="retry,recover-in-place,dump"))
    create_job(kube, make_job("op-env-71", release="7.1", strategies="retry,recover-in-place,dump"))
    new = kube.list_job_pods("default", "op-env-73")[0]
    old = kube.list_job_pods("default", "op-env-71")[0]
    assert env_value(new, "HIGH_AVAILABILITY") == "dump,recover,retry"
    assert env_value(new, k.ENV_PROCESS_RECOVER) == "on"
    assert env_value(new, k.ENV_ENABLE_RESTART_FAULT_PROCESS) == "on"
    assert env_value(new, "HCCL_ASYNC_ERROR_HANDLING") == "0"
    for name in ("HIGH_AVAILABILITY", k.ENV_PROCESS_RECOVER, k.ENV_ENABLE_RESTART_FAULT_PROCESS):
        assert name not in env_names(old)
    assert env_value(old, k.ENV_MINDX_TASK_ID)  # the base env is there in every release


def test_hand_set_recovery_env_shows_up_twice_on_72_plus(kube) -> None:
    manual = [{"name": k.ENV_PROCESS_RECOVER, "value": "on"}]
    create_job(kube, make_job("op-dup", release="7.2", strategies="recover", env=manual))
    counts = Counter(env_names(kube.list_job_pods("default", "op-dup")[0]))
    assert counts[k.ENV_PROCESS_RECOVER] == 2


def test_mindspore_env(kube) -> None:
    create_job(
        kube,
        make_job(
            "op-ms",
            framework="mindspore",
            release="26.1",
            strategies="recover,retry",
            labels={"pod-rescheduling": "on"},
        ),
    )
    scheduler, worker = kube.list_job_pods("default", "op-ms")
    assert scheduler["metadata"]["name"] == "op-ms-scheduler-0"
    assert env_value(scheduler, "MS_ROLE") == "MS_SCHED"
    assert env_value(worker, "MS_ROLE") == "MS_WORKER"
    assert env_value(worker, "MS_SCHED_HOST") == "op-ms-scheduler-0"
    assert env_value(worker, "MS_ENABLE_TFT") == "{ARF:1,HCCE:1,RSC:1,UCE:1}"
    assert env_value(worker, "MINDIO_FOR_MINDSPORE") == "1"
    assert "HIGH_AVAILABILITY" not in env_names(worker)


def test_conditions_created_then_running(kube) -> None:
    job = create_job(kube, make_job("op-cond"))
    assert conditions(job) == ["Created", "Running"]
    assert job["status"]["replicaStatuses"]["Worker"]["active"] == 1


def test_invalid_job_gets_warning_event_and_job_valid_failed(kube) -> None:
    manifest = make_job("op-invalid", labels={"framework": "caffe"})
    job = create_job(kube, manifest, running=False)
    job = wait_for(
        lambda: (lambda j: j if "Failed" in conditions(j) else None)(kube.get_job("default", "op-invalid"))
    )
    failed = job["status"]["conditions"][-1]
    assert failed["reason"] == "JobValidFailed"
    events = kube.list_events("default", "op-invalid")
    assert any(e["reason"] == "InvalidFramework" and e["type"] == "Warning" for e in events)
    assert podgroup_of(kube, job) is None
    assert kube.list_job_pods("default", "op-invalid") == []


def test_missing_ascend_container_is_invalid_container(kube) -> None:
    manifest = make_job("op-noascend")
    manifest["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = "main"
    create_job(kube, manifest, running=False)
    job = wait_for(
        lambda: (lambda j: j if "Failed" in conditions(j) else None)(kube.get_job("default", "op-noascend"))
    )
    assert "InvalidContainer" in event_reasons(kube, job)


def test_deleted_podgroup_is_recreated_from_current_job_metadata(kube) -> None:
    job = create_job(kube, make_job("op-recreate"))
    kube.custom.patch_namespaced_custom_object(
        k.ASCENDJOB_GROUP,
        k.ASCENDJOB_VERSION,
        "default",
        k.ASCENDJOB_PLURAL,
        "op-recreate",
        {"metadata": {"annotations": {k.ANNOTATION_RECOVER_STRATEGY: "dump"}}},
    )
    # The operator copies only at creation: the PodGroup still has the old value...
    pg = podgroup_of(kube, job)
    assert pg["metadata"]["annotations"][k.ANNOTATION_RECOVER_STRATEGY] == "retry,recover,dump"
    kube.delete_podgroup("default", pg["metadata"]["name"])
    # ...until it is deleted and recreated from the job's current metadata.
    recreated = wait_for(lambda: podgroup_of(kube, job), what="recreated PodGroup")
    assert recreated["metadata"]["annotations"][k.ANNOTATION_RECOVER_STRATEGY] == "dump"


def test_deleting_the_job_deletes_pods_and_podgroup(kube) -> None:
    job = create_job(kube, make_job("op-delete"))
    kube.custom.delete_namespaced_custom_object(
        k.ASCENDJOB_GROUP, k.ASCENDJOB_VERSION, "default", k.ASCENDJOB_PLURAL, "op-delete"
    )
    wait_for(
        lambda: not kube.list_job_pods("default", "op-delete") and podgroup_of(kube, job) is None,
        what="pods and PodGroup deleted",
    )


# --- pure builders -----------------------------------------------------------------------------------
def test_leader_gets_rank_zero_whatever_the_map_order() -> None:
    manifest = make_job("order", workers=2)
    specs = manifest["spec"]["replicaSpecs"]
    manifest["spec"]["replicaSpecs"] = {"Worker": specs["Worker"], "Master": specs["Master"]}
    assert [(s.role, s.rank) for s in pod_slots(manifest)] == [("Master", 0), ("Worker", 1), ("Worker", 2)]


def test_exit_alone_is_treated_like_recover_for_env() -> None:
    manifest = make_job("exit-only", strategies="exit")
    manifest["metadata"]["uid"] = "u-1"
    env = {e["name"]: e["value"] for e in injected_env(manifest, PodSlot("Worker", 0, 1), "127.0.0.1")}
    assert env["HIGH_AVAILABILITY"] == "recover"
    assert env[k.ENV_PROCESS_RECOVER] == "on"


def test_build_podgroup_queue_defaults() -> None:
    manifest = make_job("queue")
    manifest["metadata"]["uid"] = "u-2"
    del manifest["spec"]["runPolicy"]["schedulingPolicy"]["queue"]
    assert build_podgroup(manifest)["spec"]["queue"] == "default"
    assert build_podgroup(manifest)["metadata"]["name"] == "queue-u-2"


def test_bad_scale_out_type_fails_the_job_without_an_event(kube) -> None:
    # ascendjob_validate.go:48-54 returns without setting the deferred err (:34-38): the condition
    # (ascendjob_controller.go:148-155) but no Warning Event.
    manifest = make_job("op-scaleout", labels={"framework": "pytorch", "scaleout-type": "IB"})
    create_job(kube, manifest, running=False)
    job = wait_for(
        lambda: (lambda j: j if "Failed" in conditions(j) else None)(kube.get_job("default", "op-scaleout"))
    )
    failed = job["status"]["conditions"][-1]
    assert failed["message"].startswith("InvalidScaleOutConfig: the value of label scaleout-type")
    assert "InvalidScaleOutConfig" not in event_reasons(kube, job)
    assert podgroup_of(kube, job) is None


def test_missing_scaling_group_is_invalid_scaling_config(kube) -> None:
    labels = {"framework": "pytorch", "mind-cluster/scaling-rule": "r", "jobID": "7"}
    create_job(kube, make_job("op-scaling", labels=labels), running=False)
    job = wait_for(
        lambda: (lambda j: j if "Failed" in conditions(j) else None)(kube.get_job("default", "op-scaling"))
    )
    assert "InvalidScalingConfig" in event_reasons(kube, job)

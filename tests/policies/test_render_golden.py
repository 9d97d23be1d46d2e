"""Golden tests: rendering reproduces the two seed documents field by field, plus the release matrix.

Seed 000 (7.1, process-level rescheduling / in-place recovery, Elastic Agent) and seed 002 (7.3,
dying-gasp checkpoint, TaskD) are in ``tests/fixtures/seeds``; the expected lines below are copied
from them (Chinese comments translated, commands verbatim).
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from apps.policies.rendering import Artifacts, RenderResult, owned_keys, render
from apps.policies.spec import JobContext, PolicySpec
from apps.taskd.manager_script import JOB_ID_AT_RUNTIME, manager_config, render_manager_py
from mindcluster import keys as k
from tests.support.policies import seed_job

ROLES = ("Master", "Worker")

# --- verbatim lines from the seeds -----------------------------------------------------------------
SEED000_IMAGE = (
    "RUN pip3 install $MINDX_ELASTIC_PKG",
    "RUN pip3 install $MINDIO_TTP_PKG",
    "RUN sed -i '/import logging/i import mindx_elastic.api' "
    "$(pip3 show torch | grep Location | awk -F ' ' '{print $2}')/torch/distributed/run.py",
)
SEED000_MINDSPORE_IMAGE = "RUN pip install $TASKD_WHL"
SEED002_IMAGE = (
    "RUN pip3 install $TASKD_WHL",
    "RUN pip3 install $MINDIO_TTP_PKG",
    "RUN sed -i '/import os/i import taskd.python.adaptor.patch' "
    "$(pip3 show torch | grep Location | awk -F ' ' '{print $2}')/torch/distributed/run.py",
)
DISTRIBUTED_ARGS = (
    'DISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes $NNODES --node_rank $NODE_RANK '
    "--master_addr $MASTER_ADDR --master_port $MASTER_PORT --max_restarts {max_restarts} "
    '--monitor_interval {monitor_interval}"'
)
LD_PRELOAD = (
    "export LD_PRELOAD=/usr/local/Ascend/cann/lib64/libmspti.so:"
    "$(pip3 show taskd | grep Location | awk -F ' ' '{print $2}')/taskd/python/cython_api/libs/libtaskd.so"
)
SEED002_MANAGER_LINES = (
    "from taskd.api import init_taskd_manager, start_taskd_manager",
    "import os",
    'init_taskd_manager({"job_id":job_id, "node_nums": node_nums, "proc_per_node": proc_per_node})',
    "start_taskd_manager()",
)


def ascend(result: RenderResult | dict, role: str) -> dict[str, Any]:
    manifest = result.manifest if isinstance(result, RenderResult) else result
    containers = manifest["spec"]["replicaSpecs"][role]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "ascend")


def env_of(result: RenderResult, role: str) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in ascend(result, role).get("env", [])}


def ports_of(result: RenderResult, role: str) -> list[tuple[str, int]]:
    return [(p["name"], p["containerPort"]) for p in ascend(result, role).get("ports", [])]


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


# --- seed 000: MindCluster 7.1, recover / recover-in-place, Elastic Agent -------------------------------
SEED000_RECOVER = PolicySpec(mindcluster_version="7.1", strategies=("recover",), fault_scheduling="force")
SEED000_IN_PLACE = PolicySpec(
    mindcluster_version="7.1", strategies=("recover-in-place",), fault_scheduling="force"
)


@pytest.mark.parametrize("spec", [SEED000_RECOVER, SEED000_IN_PLACE], ids=["recover", "recover-in-place"])
def test_seed000_job_yaml(spec: PolicySpec) -> None:
    result = render(seed_job(), spec)
    meta = result.manifest["metadata"]
    assert meta["labels"][k.LABEL_PROCESS_RECOVER_ENABLE] == "on"
    assert meta["labels"][k.LABEL_FAULT_SCHEDULING] == "force"
    assert meta["labels"][k.LABEL_FRAMEWORK] == "pytorch"  # untouched
    assert meta["annotations"] == {k.ANNOTATION_RECOVER_STRATEGY: spec.strategies[0]}  # no timeout on 7.1
    assert result.labels == {"process-recover-enable": "on", "fault-scheduling": "force"}
    for role in ROLES:
        env = env_of(result, role)
        assert env[k.ENV_PROCESS_RECOVER] == "on"
        assert env[k.ENV_ELASTIC_PROCESS_RECOVER_ENABLE] == "1"
        if spec.strategies == ("recover-in-place",):
            assert env[k.ENV_ENABLE_RESTART_FAULT_PROCESS] == "on"
        else:
            assert k.ENV_ENABLE_RESTART_FAULT_PROCESS not in env
        # §10: TaskD/MindIO need POD_IP and TTP_PORT whatever the strategy.
        assert env[k.ENV_POD_IP] == {"fieldRef": {"fieldPath": "status.podIP"}}
        assert env[k.ENV_TTP_PORT] == "8000"
        assert ports_of(result, role) == [("ascendjob-port", 2222), ("ttp-port", 8000)]
        # 7.1 PyTorch uses Elastic Agent: no TaskD port, volume or manager.
        assert "volumes" in result.manifest["spec"]["replicaSpecs"][role]["template"]["spec"]
        assert [
            v["name"] for v in result.manifest["spec"]["replicaSpecs"][role]["template"]["spec"]["volumes"]
        ] == ["code"]
    assert result.configmap is None
    assert result.artifacts.manager_py is None
    # ClusterD reads the PodGroup; up to 7.1 the label is the user's to set, so the push sets it there too.
    assert result.podgroup_patch["metadata"]["labels"][k.LABEL_PROCESS_RECOVER_ENABLE] == "on"


@pytest.mark.parametrize("spec", [SEED000_RECOVER, SEED000_IN_PLACE], ids=["recover", "recover-in-place"])
def test_seed000_image_launcher_and_flags(spec: PolicySpec) -> None:
    artifacts = render(seed_job(), spec).artifacts
    image = lines(artifacts.dockerfile)
    for line in SEED000_IMAGE:
        assert line in image
    assert image.index(SEED000_IMAGE[0]) < image.index(SEED000_IMAGE[1]) < image.index(SEED000_IMAGE[2])
    launcher = lines(artifacts.launcher)
    assert any(line.startswith("export ELASTIC_PROCESS_RECOVER_ENABLE=1;") for line in launcher)
    in_place = any(line.startswith("export ENABLE_RESTART_FAULT_PROCESS=on;") for line in launcher)
    assert in_place == (spec.strategies == ("recover-in-place",))
    assert DISTRIBUTED_ARGS.format(max_restarts=32767, monitor_interval=30) in launcher
    assert artifacts.training_flags == "--enable-high-availability\n--enable-worker-reboot\n"
    assert "TASKD" not in artifacts.launcher


def test_seed000_mindspore_adds_taskd_wheel() -> None:
    result = render(seed_job(framework="mindspore"), SEED000_RECOVER)
    assert SEED000_MINDSPORE_IMAGE in lines(result.artifacts.dockerfile)
    assert "mindx_elastic" not in result.artifacts.dockerfile  # no torch to patch in a MindSpore image
    env = env_of(result, "Scheduler")
    assert env[k.ENV_PROCESS_RECOVER] == "on"
    assert k.ENV_ELASTIC_PROCESS_RECOVER_ENABLE not in env  # Elastic Agent is PyTorch's
    # TaskD has been MindSpore's agent since 7.0: port 9601 and a manager on the scheduler pod.
    assert ("taskd-port", 9601) in ports_of(result, "Worker")
    assert 'if [[ "${MS_SCHED_HOST}" == "${POD_IP}" ]]; then' in lines(result.artifacts.launcher)
    assert result.configmap is not None
    assert "hccl_watchdog" not in result.artifacts.training_flags
    assert result.artifacts.training_flags.startswith("# MindSpore")


# --- seed 002: MindCluster 7.3, dump, TaskD --------------------------------------------------------
SEED002_DUMP = PolicySpec(mindcluster_version="7.3", strategies=("dump",))


def test_seed002_job_yaml() -> None:
    result = render(seed_job(), SEED002_DUMP)
    meta = result.manifest["metadata"]
    assert meta["annotations"] == {k.ANNOTATION_RECOVER_STRATEGY: "dump"}
    assert k.LABEL_PROCESS_RECOVER_ENABLE not in meta["labels"]
    assert meta["labels"][k.LABEL_FAULT_SCHEDULING] == "grace"
    for role in ROLES:
        env = env_of(result, role)
        assert env[k.ENV_TTP_PORT] == "8000"
        for injected in (
            k.ENV_PROCESS_RECOVER,
            k.ENV_ELASTIC_PROCESS_RECOVER_ENABLE,
            k.ENV_ENABLE_RESTART_FAULT_PROCESS,
        ):
            assert injected not in env  # the 7.3 operator injects these itself
        assert ports_of(result, role) == [("ascendjob-port", 2222), ("ttp-port", 8000), ("taskd-port", 9601)]
        pod_spec = result.manifest["spec"]["replicaSpecs"][role]["template"]["spec"]
        assert {"name": "taskd-manager", "configMap": {"name": "taskd-manager-gpt-pretrain"}} in pod_spec[
            "volumes"
        ]
        assert {"name": "taskd-manager", "mountPath": "/opt/mindcluster/taskd", "readOnly": True} in ascend(
            result, role
        )["volumeMounts"]
    # 7.2+: the operator labels the PodGroup and ClusterD toggles it; the push leaves it alone there.
    assert k.LABEL_PROCESS_RECOVER_ENABLE in result.removed_labels
    assert k.LABEL_PROCESS_RECOVER_ENABLE not in result.podgroup_patch["metadata"]["labels"]


def test_seed002_image_lines() -> None:
    image = lines(render(seed_job(), SEED002_DUMP).artifacts.dockerfile)
    for line in SEED002_IMAGE:
        assert line in image
    assert "mindx_elastic" not in "\n".join(image)


def test_seed002_launcher_lines() -> None:
    result = render(seed_job(), SEED002_DUMP)
    launcher = lines(result.artifacts.launcher)
    assert 'export TASKD_PROCESS_ENABLE="on"' in launcher
    rank0 = launcher.index('if [[ "${RANK}" == 0 ]]; then')
    assert launcher[rank0 + 1 : rank0 + 4] == [
        "export MASTER_ADDR=${POD_IP}",
        "python /opt/mindcluster/taskd/manager.py &",
        "fi",
    ]
    assert LD_PRELOAD in launcher
    preload = launcher.index(LD_PRELOAD)
    assert "the libtaskd.so has not been loaded" in launcher[preload - 1]
    assert preload < rank0  # the manager needs libtaskd.so preloaded
    assert DISTRIBUTED_ARGS.format(max_restarts=32767, monitor_interval=30) in launcher
    assert any(
        "LD_PRELOAD" in note and "the libtaskd.so has not been loaded" in note for note in result.notes
    )


def test_seed002_launcher_is_valid_bash() -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    launcher = render(seed_job(), SEED002_DUMP).artifacts.launcher
    check = subprocess.run([bash, "-n"], input=launcher, capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stderr


def test_seed002_manager_py() -> None:
    result = render(seed_job(workers=3, npus=8), SEED002_DUMP)
    manager = result.artifacts.manager_py
    assert manager is not None
    compile(manager, "manager.py", "exec")
    for line in SEED002_MANAGER_LINES:
        assert line in manager
    assert 'job_id = os.getenv("MINDX_TASK_ID")' in manager
    assert "node_nums = 4  #" in manager  # Master 1 + Worker 3
    assert "proc_per_node = 8  #" in manager
    assert manager.index("init_taskd_manager({") < manager.index("start_taskd_manager()\n")
    configmap = result.configmap
    assert configmap == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "taskd-manager-gpt-pretrain",
            "namespace": "training",
            "labels": {"app.kubernetes.io/managed-by": "mindcluster-recovery-control-plane"},
        },
        "data": {"manager.py": manager, "taskd-launcher.sh": result.artifacts.launcher},
    }


def test_seed002_effects() -> None:
    effects = {(e.target, e.when) for e in render(seed_job(), SEED002_DUMP).effects}
    # Issue #13: recovery keys are read once, at creation (facts §1); dump needs no live key.
    assert effects == {
        ("podgroup", "recreate"),
        ("ascendjob", "recreate"),
        ("pod-template", "pod-restart"),
        ("configmap", "training-start"),
        ("image", "image-build"),
        ("launcher", "training-start"),
        ("training-script", "training-start"),
    }


# --- manager.py behaviour with a stand-in taskd package ----------------------------------------------
FAKE_TASKD_API = """
import json, os
def init_taskd_manager(config):
    with open(os.environ["FAKE_TASKD_LOG"], "a") as fh:
        fh.write(json.dumps({"init": config}) + "\\n")
    return os.environ.get("FAKE_TASKD_INIT") == "ok"
def start_taskd_manager():
    with open(os.environ["FAKE_TASKD_LOG"], "a") as fh:
        fh.write(json.dumps({"start": True}) + "\\n")
    return True
"""


def _run_manager(tmp_path: Path, *, init: str, task_id: str | None) -> subprocess.CompletedProcess[str]:
    package = tmp_path / "fake" / "taskd"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "api.py").write_text(textwrap.dedent(FAKE_TASKD_API))
    script = tmp_path / "manager.py"
    script.write_text(render_manager_py(node_nums=16, proc_per_node=8))
    env = {k_: v for k_, v in os.environ.items() if k_ != k.ENV_MINDX_TASK_ID}
    env.update(PYTHONPATH=str(tmp_path / "fake"), FAKE_TASKD_LOG=str(tmp_path / "log"), FAKE_TASKD_INIT=init)
    if task_id is not None:
        env[k.ENV_MINDX_TASK_ID] = task_id
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)


def test_manager_py_inits_then_starts(tmp_path: Path) -> None:
    run = _run_manager(tmp_path, init="ok", task_id="0c1d-uid")
    assert run.returncode == 0, run.stderr
    log = (tmp_path / "log").read_text().splitlines()
    assert log == [
        '{"init": {"job_id": "0c1d-uid", "node_nums": 16, "proc_per_node": 8}}',
        '{"start": true}',
    ]


def test_manager_py_exits_non_zero_when_init_fails(tmp_path: Path) -> None:
    run = _run_manager(tmp_path, init="fail", task_id="0c1d-uid")
    assert run.returncode != 0
    assert "init_taskd_manager returned False" in run.stderr and "LD_PRELOAD" in run.stderr
    assert "start" not in (tmp_path / "log").read_text()


def test_manager_py_exits_non_zero_without_task_id(tmp_path: Path) -> None:
    run = _run_manager(tmp_path, init="ok", task_id=None)
    assert run.returncode != 0
    assert "MINDX_TASK_ID" in run.stderr


def test_manager_config_from_job() -> None:
    job = JobContext.from_manifest(seed_job(workers=7, npus=16))
    assert manager_config(job) == {"job_id": JOB_ID_AT_RUNTIME, "node_nums": 8, "proc_per_node": 16}


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "8"])
def test_render_manager_py_rejects_bad_sizes(bad: Any) -> None:
    with pytest.raises(ValueError):
        render_manager_py(node_nums=bad, proc_per_node=8)
    with pytest.raises(ValueError):
        render_manager_py(node_nums=8, proc_per_node=bad)


# --- the release matrix ----------------------------------------------------------------------------
def test_72_elastic_agent_anchor_and_rendezvous_comment() -> None:
    artifacts = render(seed_job(), PolicySpec(mindcluster_version="7.2", strategies=("recover",))).artifacts
    image = artifacts.dockerfile
    assert (
        "RUN sed -i '/import os/i import mindx_elastic.api' "
        "$(pip3 show torch | grep Location | awk -F ' ' '{print $2}')/torch/distributed/run.py"
    ) in image
    assert "PrefixStore" in image and "2.6" in image
    assert "export ELASTIC_PROCESS_RECOVER_ENABLE" not in artifacts.launcher


@pytest.mark.parametrize("release", ["7.2", "7.3", "26.0", "26.1"])
def test_operator_injected_env_never_rendered_from_72(release: str) -> None:
    spec = PolicySpec(
        mindcluster_version=release, strategies=("retry", "recover-in-place", "recover", "dump")
    )
    result = render(seed_job(), spec)
    for role in ROLES:
        env = env_of(result, role)
        for injected in (
            k.ENV_PROCESS_RECOVER,
            k.ENV_ELASTIC_PROCESS_RECOVER_ENABLE,
            k.ENV_ENABLE_RESTART_FAULT_PROCESS,
        ):
            assert injected not in env
    assert k.LABEL_PROCESS_RECOVER_ENABLE not in result.manifest["metadata"]["labels"]
    assert result.annotations[k.ANNOTATION_WAIT_RESCHEDULE_TIMEOUT] == "270"
    assert result.annotations[k.ANNOTATION_RECOVER_STRATEGY] == "retry,recover-in-place,recover,dump"


def test_wait_reschedule_timeout_only_for_rescheduling_strategies() -> None:
    dump_only = render(seed_job(), PolicySpec(mindcluster_version="26.1", strategies=("retry", "dump")))
    assert k.ANNOTATION_WAIT_RESCHEDULE_TIMEOUT in dump_only.removed_annotations
    elastic = render(
        seed_job(),
        PolicySpec(mindcluster_version="26.1", strategies=("elastic-training",), wait_reschedule_timeout=90),
    )
    assert elastic.annotations[k.ANNOTATION_WAIT_RESCHEDULE_TIMEOUT] == "90"


def test_training_flags_per_strategy() -> None:
    spec = PolicySpec(mindcluster_version="26.1", strategies=("elastic-training", "dump", "retry", "recover"))
    assert render(seed_job(), spec).artifacts.training_flags.splitlines() == [
        "--enable-high-availability",
        "--enable-hbmfault-repair",
        "--enable-worker-reboot",
        "--enable-elastic-training",
    ]
    assert render(seed_job(), PolicySpec(strategies=())).artifacts.training_flags == ""


def test_mindspore_retry_says_what_mindformers_needs() -> None:
    flags = render(
        seed_job(framework="mindspore"), PolicySpec(strategies=("retry", "dump"))
    ).artifacts.training_flags
    assert all(line.startswith("#") for line in flags.splitlines())
    assert "hccl_watchdog: False" in flags
    assert "--enable" not in flags


def test_pod_rescheduling_only_uses_taskd_with_process_recovery_off() -> None:
    result = render(seed_job(), PolicySpec(mindcluster_version="7.3", pod_rescheduling=True))
    assert result.labels == {"fault-scheduling": "grace", "pod-rescheduling": "on"}
    assert ("taskd-port", 9601) in ports_of(result, "Master")
    assert ("ttp-port", 8000) not in ports_of(result, "Master")
    assert k.ENV_TTP_PORT not in env_of(result, "Worker")
    assert k.ENV_POD_IP in env_of(result, "Worker")
    assert 'export TASKD_PROCESS_ENABLE="off"' in lines(result.artifacts.launcher)
    assert "RUN pip3 install $MINDIO_TTP_PKG" not in result.artifacts.dockerfile
    assert result.configmap is not None


def test_job_rescheduling_only_changes_no_pod_template() -> None:
    job = seed_job()
    result = render(job, PolicySpec(mindcluster_version="26.1"))
    assert result.manifest["spec"]["replicaSpecs"] == job["spec"]["replicaSpecs"]
    assert result.labels == {"fault-scheduling": "grace"}
    assert result.annotations == {}
    assert result.configmap is None and result.artifacts.manager_py is None
    assert [e.target for e in result.effects] == ["podgroup", "ascendjob"]  # both read at creation
    assert "No image changes" in result.artifacts.dockerfile


def test_labels_for_retry_times_sub_health_and_platform_mode() -> None:
    spec = PolicySpec(
        strategies=("dump", "recover"),
        fault_retry_times=5,
        sub_healthy_strategy="graceExit",
        platform_mode=True,
        fault_scheduling="off",
    )
    result = render(seed_job(), spec)
    assert result.labels == {"fault-retry-times": "5", "subHealthyStrategy": "graceExit"}
    assert k.LABEL_FAULT_SCHEDULING in result.removed_labels
    # The standing answer (default_strategy), never "": ClusterD waits for retry/recover/dump (issue #13)
    assert result.annotations[k.ANNOTATION_PLATFORM_STRATEGY] == "recover"
    assert result.podgroup_patch["metadata"]["annotations"][k.ANNOTATION_PLATFORM_STRATEGY] == "recover"
    off = render(result.manifest, PolicySpec(strategies=("dump", "recover")))
    assert k.ANNOTATION_PLATFORM_STRATEGY not in off.manifest["metadata"]["annotations"]
    assert off.podgroup_patch["metadata"]["annotations"][k.ANNOTATION_PLATFORM_STRATEGY] is None
    assert off.podgroup_patch["metadata"]["labels"]["fault-retry-times"] is None


def test_backoff_limit_set_and_removed() -> None:
    job = seed_job()
    job["spec"]["runPolicy"]["backoffLimit"] = 30
    limited = render(job, PolicySpec(backoff_limit=3))
    assert limited.manifest["spec"]["runPolicy"]["backoffLimit"] == 3
    assert limited.job_patch["spec"]["runPolicy"] == {"backoffLimit": 3}
    unlimited = render(job, PolicySpec(backoff_limit=None))
    assert "backoffLimit" not in unlimited.manifest["spec"]["runPolicy"]
    assert unlimited.job_patch["spec"]["runPolicy"] == {"backoffLimit": None}
    assert any("backoffLimit (30)" in note for note in unlimited.notes)


# --- structure of the result -------------------------------------------------------------------------
def test_owned_keys() -> None:
    labels, annotations = owned_keys()
    assert labels == {
        "fault-scheduling",
        "pod-rescheduling",
        "fault-retry-times",
        "subHealthyStrategy",
        "process-recover-enable",
    }
    assert annotations == {"recover-strategy", "wait-reschedule-timeout", "ProcessRecoverStrategy"}
    assert k.ANNOTATION_POLICY_REVISION not in annotations


def test_render_never_mutates_its_input() -> None:
    job = seed_job()
    before = copy.deepcopy(job)
    result = render(job, SEED002_DUMP)
    assert job == before
    ascend(result, "Master")["env"].append({"name": "X", "value": "1"})
    assert job == before


def test_other_containers_are_never_touched() -> None:
    job = seed_job()
    sidecar = {"name": "log-shipper", "image": "fluent-bit:3", "env": [{"name": "A", "value": "1"}]}
    job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"].insert(0, copy.deepcopy(sidecar))
    result = render(job, SEED002_DUMP)
    assert result.manifest["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0] == sidecar


def test_user_entries_with_policy_names_are_updated_in_place() -> None:
    job = seed_job()
    container = ascend(job, "Master")
    container["env"] = [{"name": k.ENV_TTP_PORT, "value": "7000"}, {"name": "A", "value": "1"}]
    container["ports"] = [
        {"containerPort": 8000, "name": "mindio"},
        {"containerPort": 9601, "name": "taskd-port"},
    ]
    result = render(job, SEED002_DUMP)
    assert ascend(result, "Master")["env"][:2] == [
        {"name": "TTP_PORT", "value": "8000"},
        {"name": "A", "value": "1"},
    ]
    assert ports_of(result, "Master") == [("ttp-port", 8000), ("taskd-port", 9601)]
    # Entries the user wrote are the user's: a policy that no longer needs them leaves them in place.
    none = render(result.manifest, PolicySpec())
    assert ports_of(none, "Master") == [("ttp-port", 8000), ("taskd-port", 9601)]
    assert [e["name"] for e in ascend(none, "Master")["env"]] == ["TTP_PORT", "A"]


def test_switching_policies_takes_back_only_what_it_added() -> None:
    job = seed_job()
    in_place_71 = render(job, SEED000_IN_PLACE)
    to_dump_73 = render(in_place_71.manifest, SEED002_DUMP)
    assert to_dump_73.manifest == render(job, SEED002_DUMP).manifest
    back_to_nothing = render(to_dump_73.manifest, PolicySpec(fault_scheduling="off"))
    assert back_to_nothing.manifest == render(job, PolicySpec(fault_scheduling="off")).manifest
    assert back_to_nothing.manifest["spec"]["replicaSpecs"] == job["spec"]["replicaSpecs"]


def test_job_patch_applied_to_input_gives_the_manifest() -> None:
    from apps.core.jsonmerge import apply_merge_patch

    def stored(obj: dict[str, Any]) -> dict[str, Any]:
        # ObjectMeta drops empty label/annotation maps (omitempty), which a merge patch cannot express.
        meta = obj["metadata"]
        obj["metadata"] = {key: value for key, value in meta.items() if value != {}}
        return obj

    job = seed_job()
    previous = render(job, SEED000_IN_PLACE).manifest
    for spec in (SEED002_DUMP, PolicySpec(), SEED000_RECOVER, PolicySpec(backoff_limit=4)):
        result = render(previous, spec)
        assert stored(apply_merge_patch(previous, result.job_patch)) == result.manifest
        previous = result.manifest


def test_artifact_files() -> None:
    files = render(seed_job(), SEED002_DUMP).artifacts.files()
    assert set(files) == {"Dockerfile.snippet", "launcher.sh", "training-flags.txt", "manager.py"}
    assert set(Artifacts("a", "b", "c").files()) == {
        "Dockerfile.snippet",
        "launcher.sh",
        "training-flags.txt",
    }


def test_taking_back_a_taskd_policy_is_a_pod_template_effect() -> None:
    previous = render(seed_job(), SEED002_DUMP).manifest
    result = render(previous, PolicySpec())
    effects = {e.target: e for e in result.effects}
    assert effects["pod-template"].when == "pod-restart"
    assert "takes back" in effects["pod-template"].summary

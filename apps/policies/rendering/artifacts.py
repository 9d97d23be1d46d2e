"""Image lines, launcher lines and training flags, per release and framework (the two seeds).

Seed 000 (7.1, Elastic Agent) and seed 002 (7.3, TaskD) are reproduced command for command; the
Chinese comments are translated. mindcluster.md §4 lists what changes between releases.
"""

from __future__ import annotations

from apps.policies.spec import release_at_least
from mindcluster import keys as k

from .manifest import TASKD_MOUNT_PATH
from .plan import MINDSPORE, PYTORCH, RenderPlan

TORCH_RUN_PY = "$(pip3 show torch | grep Location | awk -F ' ' '{print $2}')/torch/distributed/run.py"
TASKD_LOCATION = "$(pip3 show taskd | grep Location | awk -F ' ' '{print $2}')"
LIBMSPTI = "/usr/local/Ascend/cann/lib64/libmspti.so"
LIBTASKD = f"{TASKD_LOCATION}/taskd/python/cython_api/libs/libtaskd.so"
LD_PRELOAD_LINE = f"export LD_PRELOAD={LIBMSPTI}:{LIBTASKD}"
LIBTASKD_ERROR = "the libtaskd.so has not been loaded"
MANAGER_PATH = f"{TASKD_MOUNT_PATH}/manager.py"
DISTRIBUTED_ARGS_BASE = (
    "--nproc_per_node $GPUS_PER_NODE --nnodes $NNODES --node_rank $NODE_RANK "
    "--master_addr $MASTER_ADDR --master_port $MASTER_PORT"
)
AGENT_PATCH_COMMENT = (
    "# Required for graceful fault tolerance, Pod-level rescheduling or process-level rescheduling."
)
JOB_LEVEL_ONLY = "Job-level rescheduling only"

# MindSpore's MS_ENABLE_TFT tokens per strategy (mindcluster.md §3.4).
MS_TFT_TOKENS = {
    "retry": "UCE:1,HCCE:1",
    "recover": "ARF:1",
    "recover-in-place": "ARF:1",
    "exit": "ARF:1",
    "dump": "TTP:1",
}


def _lines(*lines: str) -> str:
    return "\n".join(lines) + "\n" if lines else ""


# --- image ---------------------------------------------------------------------------------------
def dockerfile(plan: RenderPlan) -> str:
    """Dockerfile lines that put MindIO and the recovery agent into the training image."""
    if plan.framework not in (PYTORCH, MINDSPORE):
        return _lines(
            f"# {plan.framework}: MindIO and TaskD exist for PyTorch and MindSpore only;",
            "# no image changes apply.",
            "# Job- and Pod-level rescheduling need none.",
        )
    if not plan.needs_agent:
        return _lines(f"# No image changes: this policy uses {JOB_LEVEL_ONLY}.")
    if plan.framework == MINDSPORE:
        lines = [
            "# MindCluster lossless resumable training (MindSpore; TaskD is its agent since 7.0):",
            "# TASKD_WHL is the path of the TaskD whl, MINDIO_TTP_PKG the path of the MindIO whl.",
            "# MindSpore and MindIO must be installed in the same path.",
        ]
        if plan.process_machinery:
            lines.append("RUN pip3 install $MINDIO_TTP_PKG")
        lines += [
            "# MindSpore: process-level rescheduling needs the following command.",
            "RUN pip install $TASKD_WHL",
        ]
        return _lines(*lines)
    if plan.elastic_agent:
        return _lines(*_elastic_agent_image(plan))
    lines = [
        f"# MindCluster lossless resumable training ({plan.release}, TaskD): TASKD_WHL is the path of",
        "# the TaskD whl, MINDIO_TTP_PKG the path of the MindIO whl; fill them in for your environment.",
        "RUN pip3 install $TASKD_WHL",
    ]
    if plan.process_machinery:
        lines.append("RUN pip3 install $MINDIO_TTP_PKG")
    lines += [
        "",
        AGENT_PATCH_COMMENT,
        f"RUN sed -i '/import os/i import taskd.python.adaptor.patch' {TORCH_RUN_PY}",
    ]
    return _lines(*lines)


def _elastic_agent_image(plan: RenderPlan) -> list[str]:
    lines = [
        f"# MindCluster lossless resumable training ({plan.release}, Elastic Agent): MINDX_ELASTIC_PKG is",
        "# the path of the Elastic Agent whl, MINDIO_TTP_PKG the path of the MindIO whl; fill them in",
        "# for your environment.",
        "RUN pip3 install $MINDX_ELASTIC_PKG",
    ]
    if plan.process_machinery:
        lines.append("RUN pip3 install $MINDIO_TTP_PKG")
    anchor = "import os" if release_at_least(plan.release, "7.2") else "import logging"
    lines += ["", AGENT_PATCH_COMMENT, f"RUN sed -i '/{anchor}/i import mindx_elastic.api' {TORCH_RUN_PY}"]
    if release_at_least(plan.release, "7.2"):
        lines += [
            "# PyTorch >= 2.6 only: also patch torch/distributed/elastic/rendezvous so that every restart",
            '# attempt uses its own PrefixStore("/worker/attempt_<n>") (MindCluster 7.2 docs);',
            "# TaskD (7.3+) ships this fix itself.",
        ]
    return lines


# --- launcher ------------------------------------------------------------------------------------
def launcher(plan: RenderPlan) -> str:
    """Lines for the training launcher (e.g. scripts/train_start.sh); also shipped in the ConfigMap."""
    if plan.framework not in (PYTORCH, MINDSPORE) or not plan.needs_agent:
        return _lines(f"# No launcher changes: this policy uses {JOB_LEVEL_ONLY} for this job.")
    if plan.uses_taskd:
        return _lines(*_taskd_launcher(plan))
    return _lines(*_elastic_agent_launcher(plan))


def _distributed_args(plan: RenderPlan) -> list[str]:
    spec = plan.spec
    return [
        "# torchrun: how many faults one container may handle before training exits (--max_restarts) and",
        "# how often the agent checks the training processes, in seconds (--monitor_interval).",
        f'DISTRIBUTED_ARGS="{DISTRIBUTED_ARGS_BASE} --max_restarts {spec.max_restarts} '
        f'--monitor_interval {spec.monitor_interval}"',
    ]


def _elastic_agent_launcher(plan: RenderPlan) -> list[str]:
    lines = [
        f"# MindCluster {plan.release}, Elastic Agent: add to the training launcher (e.g. train_start.sh)."
    ]
    if plan.strategies and plan.hand_set_recovery_env:
        lines.append(
            f"export {k.ENV_ELASTIC_PROCESS_RECOVER_ENABLE}=1;   # process-level recovery (any strategy)"
        )
        if "recover-in-place" in plan.strategies:
            lines.append(
                f"export {k.ENV_ENABLE_RESTART_FAULT_PROCESS}=on;    # in-place recovery (recover-in-place)"
            )
    elif plan.strategies:
        lines.append(
            f"# From 7.2 the Ascend operator injects {k.ENV_PROCESS_RECOVER}, "
            f"{k.ENV_ELASTIC_PROCESS_RECOVER_ENABLE} and {k.ENV_ENABLE_RESTART_FAULT_PROCESS}; "
            "do not export them."
        )
    return [*lines, "", *_distributed_args(plan)]


def _taskd_launcher(plan: RenderPlan) -> list[str]:
    # TaskD's manager reads TASKD_PROCESS_ENABLE: "off" when only Pod-level rescheduling is wanted;
    # MindSpore needs it "on" before its manager starts (mindcluster.md §3.3, §4).
    enable = "on" if plan.process_machinery or plan.framework == MINDSPORE else "off"
    lines = [
        f"# MindCluster {plan.release}, TaskD: add to the training launcher (e.g. train_start.sh) before",
        f"# the training command. manager.py is mounted from ConfigMap {plan.configmap_name}",
        f"# at {TASKD_MOUNT_PATH}.",
        f'export {k.ENV_TASKD_PROCESS_ENABLE}="{enable}"',
        f'# Preloading libmspti.so (CANN) and libtaskd.so (TaskD) fixes "{LIBTASKD_ERROR}".',
        LD_PRELOAD_LINE,
        "",
    ]
    if plan.framework == MINDSPORE:
        lines += [
            "# MindSpore: start the TaskD manager on the scheduler pod.",
            f'if [[ "${{MS_SCHED_HOST}}" == "${{{k.ENV_POD_IP}}}" ]]; then',
            f"    python {MANAGER_PATH} &",
            "fi",
        ]
        return lines
    lines += [
        "# PyTorch: start the TaskD manager on rank 0, once the distributed environment is known.",
        'if [[ "${RANK}" == 0 ]]; then',
        f"    export MASTER_ADDR=${{{k.ENV_POD_IP}}}",
        f"    python {MANAGER_PATH} &",
        "fi",
        "",
        *_distributed_args(plan),
    ]
    return lines


# --- training flags ------------------------------------------------------------------------------
def training_flags(plan: RenderPlan) -> str:
    """MindSpeed-LLM flags for pretrain_gpt.py & co., one per line (comments for MindSpore)."""
    strategies = set(plan.strategies)
    if not strategies:
        return ""
    if plan.framework == MINDSPORE:
        return _lines(*_mindformers_comments(plan))
    if plan.framework != PYTORCH:
        return ""
    flags = ["--enable-high-availability"]
    if "retry" in strategies:
        flags.append("--enable-hbmfault-repair")
    if strategies & {"recover", "recover-in-place"}:
        flags.append("--enable-worker-reboot")
    if "elastic-training" in strategies:
        flags.append("--enable-elastic-training")
    return _lines(*flags)


def _mindformers_comments(plan: RenderPlan) -> list[str]:
    tokens = sorted({MS_TFT_TOKENS[s] for s in plan.strategies if s in MS_TFT_TOKENS})
    if plan.spec.pod_rescheduling:
        tokens.append("RSC:1")
    tft = "{" + ",".join(tokens) + "}"
    lines = ["# MindSpore (MindFormers): no MindSpeed-LLM flags."]
    if plan.hand_set_recovery_env:
        lines.append(
            f'# Before 7.2 the operator does not inject it: set MS_ENABLE_TFT="{tft}" in the job env.'
        )
    else:
        lines.append(f'# The Ascend operator sets MS_ENABLE_TFT="{tft}" and MINDIO_FOR_MINDSPORE=1 itself.')
    if "retry" in plan.strategies:
        lines.append("# retry: set context.ascend_config.hccl_watchdog: False in the MindFormers model YAML.")
    return lines

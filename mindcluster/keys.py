"""Names MindCluster reads and writes, spelled exactly as the cluster spells them.

Every label, annotation, env var, port and API coordinate the control plane touches is defined
here once (see ``shared/reference/mindcluster.md``); nothing else should inline these strings.
"""

from __future__ import annotations

from typing import Final

# --- API coordinates -------------------------------------------------------------------------
ASCENDJOB_GROUP = "mindxdl.gitee.com"
ASCENDJOB_VERSION = "v1"
ASCENDJOB_API_VERSION = f"{ASCENDJOB_GROUP}/{ASCENDJOB_VERSION}"
ASCENDJOB_KIND = "AscendJob"
ASCENDJOB_PLURAL = "ascendjobs"

PODGROUP_GROUP = "scheduling.volcano.sh"
PODGROUP_VERSION = "v1beta1"
PODGROUP_API_VERSION = f"{PODGROUP_GROUP}/{PODGROUP_VERSION}"
PODGROUP_KIND = "PodGroup"
PODGROUP_PLURAL = "podgroups"

MINDX_NAMESPACE = "mindx-dl"
VOLCANO_SCHEDULER = "volcano"

# --- job labels --------------------------------------------------------------------------------
LABEL_FRAMEWORK = "framework"
# The values of the framework label the operator knows (its PyTorch/MindSpore/TensorFlow job kinds).
FRAMEWORKS: Final = ("pytorch", "mindspore", "tensorflow")
LABEL_RING_CONTROLLER = "ring-controller.atlas"
LABEL_FAULT_SCHEDULING = "fault-scheduling"
LABEL_POD_RESCHEDULING = "pod-rescheduling"
LABEL_PROCESS_RECOVER_ENABLE = "process-recover-enable"
# ClusterD sets it while FaultRetry waits for the job to run again (controller.go:1534-1568).
PROCESS_RECOVER_PAUSE = "pause"
LABEL_FAULT_RETRY_TIMES = "fault-retry-times"
LABEL_SUB_HEALTHY_STRATEGY = "subHealthyStrategy"
# Elastic scaling (ascend-operator pkg/controllers/scaling/types.go:47-49): a job with the rule label
# must also carry its group and its job group's ID (controller.go:51-66).
LABEL_SCALING_RULE = "mind-cluster/scaling-rule"
LABEL_SCALING_GROUP = "mind-cluster/group-name"
LABEL_SCALING_JOB_ID = "jobID"
# 910A5 scale-out network (ascend-operator pkg/api/v1/constants_v2.go:33-37), read upper-cased.
LABEL_SCALE_OUT_TYPE = "scaleout-type"
SCALE_OUT_TYPES: Final = ("ROCE", "UBOE")

# --- job annotations ---------------------------------------------------------------------------
ANNOTATION_RECOVER_STRATEGY = "recover-strategy"
ANNOTATION_WAIT_RESCHEDULE_TIMEOUT = "wait-reschedule-timeout"

# Platform mode (mindcluster.md §6.4): the *presence* of ProcessRecoverStrategy switches it on.
ANNOTATION_PLATFORM_STRATEGY = "ProcessRecoverStrategy"
ANNOTATION_CONFIRM_FAULT = "ProcessConfirmFault"
ANNOTATION_RESULT_FAULT = "ProcessResultFault"
ANNOTATION_RANK_TABLE_READY = "RankTableReady"
ANNOTATION_RECOVER_STATUS = "ProcessRecoverStatus"

# Annotation the control plane itself writes so drift and ownership can be traced to a revision.
ANNOTATION_POLICY_REVISION = "recovery.mindcluster.io/policy-revision"
ANNOTATION_MANAGED_KEYS = "recovery.mindcluster.io/managed-keys"

# --- containers, env, ports --------------------------------------------------------------------
CONTAINER_NAME = "ascend"
PORT_ASCENDJOB = ("ascendjob-port", 2222)
PORT_TTP_NAME = "ttp-port"
PORT_TASKD = ("taskd-port", 9601)
TASKD_PROXY_PORT = 9602
CLUSTERD_GRPC_PORT = 8899

ENV_POD_IP = "POD_IP"
ENV_TTP_PORT = "TTP_PORT"
ENV_PROCESS_RECOVER = "PROCESS_RECOVER"
ENV_ELASTIC_PROCESS_RECOVER_ENABLE = "ELASTIC_PROCESS_RECOVER_ENABLE"
ENV_ENABLE_RESTART_FAULT_PROCESS = "ENABLE_RESTART_FAULT_PROCESS"
ENV_TASKD_PROCESS_ENABLE = "TASKD_PROCESS_ENABLE"
ENV_MINDX_TASK_ID = "MINDX_TASK_ID"
ENV_PYTORCH_NO_NPU_MEMORY_CACHING = "PYTORCH_NO_NPU_MEMORY_CACHING"

# NPU extended resources: huawei.com/Ascend910, huawei.com/Ascend310P, huawei.com/npu, ...
NPU_RESOURCE_PREFIXES = ("huawei.com/Ascend", "huawei.com/npu")

# --- ConfigMaps --------------------------------------------------------------------------------
TASKD_MANAGER_CONFIGMAP_PREFIX = "taskd-manager-"
RESET_CONFIGMAP_PREFIX = "reset-config-"
RESCHEDULE_REASON_CONFIGMAP = "job-reschedule-reason"

# --- replica roles per framework (ascendjob_validate.go) ----------------------------------------
LEADER_ROLE = {"pytorch": "Master", "mindspore": "Scheduler", "tensorflow": "Chief"}
WORKER_ROLE = "Worker"

# Where a job declares its MindCluster release (our convention; the cluster itself does not say).
LABEL_RELEASE = "mindcluster.io/release"
ANNOTATION_RELEASE = "recovery.mindcluster.io/release"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "mindcluster-recovery-control-plane"

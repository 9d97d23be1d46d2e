"""When each key a policy writes takes effect: the one table everything else reads.

MindCluster reads most recovery keys once (``shared/reference/mindcluster-source-facts.md`` §1): the
operator when it creates the job and its PodGroup, ClusterD at the job's first ``Init``. Those keys
take effect when the job is (re)created; on a running job they wait for a recreation. Only a few are
read at every fault. Line numbers are those of Ascend/mind-cluster at 22bb3d98.
"""

from __future__ import annotations

from typing import Literal

from mindcluster import keys as k

When = Literal["live", "recreate", "pod-restart", "image-build", "training-start"]
WHENS: tuple[When, ...] = ("live", "recreate", "pod-restart", "image-build", "training-start")
# What an in_effect ``pending`` entry waits for: a ``when``, or nothing (a live key already written).
WAITS_FOR = ("recreate", "pod-restart", "image-build", "training-start", "nothing")

# Recovery keys in the metadata the operator copies to the PodGroup once, at creation
# (component/ascend-operator/pkg/controllers/v1/job.go:428-442), and ClusterD snapshots at Init
# (component/clusterd/pkg/application/recover/fault_recover_service.go:570-592, cached until the
# PodGroup is deleted).
LABEL_WHEN: dict[str, When] = {
    # component/clusterd/pkg/domain/common/utils.go:114-120 (job-rescheduling / pod-rescheduling)
    k.LABEL_FAULT_SCHEDULING: "recreate",
    k.LABEL_POD_RESCHEDULING: "recreate",
    # component/clusterd/pkg/domain/common/utils.go:130-138
    k.LABEL_SUB_HEALTHY_STRATEGY: "recreate",
    # Set by the operator only when it creates the PodGroup from a job with recover-strategy
    # (component/ascend-operator/pkg/controllers/v1/job.go:479-491); read at Init
    # (component/clusterd/pkg/domain/common/utils.go:124-129, fault_recover_service.go:550-555).
    k.LABEL_PROCESS_RECOVER_ENABLE: "recreate",
    # Read only in the job-create handler
    # (component/ascend-operator/pkg/controllers/v1/ascendjob_controller.go:361-401).
    k.LABEL_FAULT_RETRY_TIMES: "recreate",
}
ANNOTATION_WHEN: dict[str, When] = {
    # component/clusterd/pkg/domain/common/utils.go:107-113, snapshotted at Init
    k.ANNOTATION_RECOVER_STRATEGY: "recreate",
    # Read at every fault (component/clusterd/pkg/application/recover/controller.go:1668-1675).
    k.ANNOTATION_WAIT_RESCHEDULE_TIMEOUT: "live",
    # Its *presence* is platform mode, snapshotted at Init
    # (component/clusterd/pkg/domain/common/utils.go:106); its value is polled live at each fault
    # (component/clusterd/pkg/application/recover/fault_recover_platform_plugin.go). See key_when().
    k.ANNOTATION_PLATFORM_STRATEGY: "recreate",
    k.ANNOTATION_RESULT_FAULT: "live",
    k.ANNOTATION_RANK_TABLE_READY: "live",
}
# runPolicy.backoffLimit: the job-create handler only (ascendjob_controller.go:375-380).
BACKOFF_LIMIT_KEY = "runPolicy.backoffLimit"
SPEC_WHEN: dict[str, When] = {BACKOFF_LIMIT_KEY: "recreate"}

# Everything outside the metadata: pod templates, image, launcher, flags, manager.py.
TARGET_WHEN: dict[str, When] = {
    "pod-template": "pod-restart",  # env, ports, volumes: kubelet, when a pod is next created
    "image": "image-build",
    "launcher": "training-start",
    "training-script": "training-start",
    "configmap": "training-start",  # manager.py and the launcher lines, read when training starts
}

# The creation-time keys of the metadata, in the order the UI lists them.
CREATION_LABELS: tuple[str, ...] = tuple(key for key, when in LABEL_WHEN.items() if when == "recreate")
CREATION_ANNOTATIONS: tuple[str, ...] = (k.ANNOTATION_RECOVER_STRATEGY, k.ANNOTATION_PLATFORM_STRATEGY)
PLATFORM_MODE_KEY = f"{k.ANNOTATION_PLATFORM_STRATEGY} (presence: platform mode)"


def key_when(section: str, key: str, *, presence_changes: bool = True) -> When:
    """When a change of ``key`` (``labels``, ``annotations`` or ``spec``) takes effect.

    ``ProcessRecoverStrategy`` is both: switching platform mode on or off (the key appears or goes)
    waits for a recreation; a new value of a key that stays is read at the next fault.
    """
    if section == "spec":
        return SPEC_WHEN.get(key, "pod-restart")
    if section == "labels":
        return LABEL_WHEN.get(key, "live")
    if key == k.ANNOTATION_PLATFORM_STRATEGY:
        return "recreate" if presence_changes else "live"
    return ANNOTATION_WHEN.get(key, "live")

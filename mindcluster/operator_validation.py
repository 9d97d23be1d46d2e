"""The ascend-operator's AscendJob validation (``ascendjob_validate.go``) as a pure function.

Paths are in Ascend/mind-cluster ``component/ascend-operator/pkg/controllers/v1/``. ``validateJob``
(:25-62) stops at the first failure and returns one (reason, message); the operator records it as a
Warning Event (:34-38) and, from v26.0.0, as the condition ``Failed``/``JobValidFailed`` with the
message ``"<reason>: <message>"`` (ascendjob_controller.go:148-155). The reason names are the
v26.0.0+ ones (consts.go:146-155); releases before 26.0 (v7.2.RC1 to v7.3.2, one and the same file)
give other reasons and messages, check a replica type after its containers, refuse an image-less
container of any name, and set no condition (only the Event; v7.3.0 ascendjob_controller.go:148-151):
``validate_job(..., release=...)`` follows the job's release (``LEGACY_REASON``).

Two label checks come first (:40-54): the elastic-scaling labels (``r.scaler.ValidJob``,
scaling/controller.go:51-66, ``InvalidScalingConfig``, before 26.0 ``invalid scaling config`` with
shorter messages) and, from 26.0 only, the 910A5 ``scaleout-type`` label (utils/job_v2.go:53-63,
``InvalidScaleOutConfig``). That second check returns without setting the deferred ``err``, so the
operator records no Event for it, only the condition (``records_event``).

Go walks ``replicaSpecs`` (a map) in random order, so with two bad replica types the real operator
may report either; here they are checked in manifest order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from mindcluster import keys as k
from mindcluster.releases import DEFAULT_RELEASE, release_at_least

# consts.go:146-155
REASON_INVALID_SCALING_CONFIG: Final = "InvalidScalingConfig"
REASON_INVALID_SCALE_OUT_CONFIG: Final = "InvalidScaleOutConfig"
REASON_INVALID_SPECS: Final = "InvalidSpecs"
REASON_INVALID_REPLICA_TYPE: Final = "InvalidReplicaType"
REASON_INVALID_SUCCESS_POLICY: Final = "InvalidSuccessPolicy"
REASON_INVALID_QUEUE: Final = "InvalidQueue"
REASON_INVALID_FRAMEWORK: Final = "InvalidFramework"
REASON_INVALID_REPLICA_SPEC: Final = "InvalidReplicaSpec"
REASON_INVALID_CONTAINER: Final = "InvalidContainer"
# Every reason validateJob can give, in the order its checks run (:40-61, :64-92, :98-194).
REASONS: Final = (
    REASON_INVALID_SCALING_CONFIG,
    REASON_INVALID_SCALE_OUT_CONFIG,
    REASON_INVALID_SPECS,
    REASON_INVALID_SUCCESS_POLICY,
    REASON_INVALID_QUEUE,
    REASON_INVALID_FRAMEWORK,
    REASON_INVALID_REPLICA_TYPE,
    REASON_INVALID_REPLICA_SPEC,
    REASON_INVALID_CONTAINER,
)
# Before v26.0.0 (07d2c20f) the same checks gave these Event reasons (v7.3.0 ascendjob_validate.go:24-262).
NAMED_SINCE: Final = "26.0"
LEGACY_REASON: Final = {
    REASON_INVALID_SCALING_CONFIG: "invalid scaling config",
    REASON_INVALID_SPECS: "SpecsError",
    REASON_INVALID_SUCCESS_POLICY: "SuccessPolicyError",
    REASON_INVALID_QUEUE: "QueueGetFailed",
    REASON_INVALID_FRAMEWORK: "FrameworkLabelError",
    REASON_INVALID_REPLICA_TYPE: "ReplicaTypeError",
    REASON_INVALID_REPLICA_SPEC: "ReplicaTypeError",
    REASON_INVALID_CONTAINER: "ContainerError",
}
# The condition the operator sets on a job that fails validation (ascendjob_controller.go:148-155).
CONDITION_REASON_JOB_VALID_FAILED: Final = "JobValidFailed"
MAX_REPLICAS: Final = 20000  # consts.go:129
# api/v1/common.go:11-14: SuccessPolicyDefault "" and SuccessPolicyAllWorkers.
SUCCESS_POLICIES: Final = ("", "AllWorkers")
# ascend-common/api/default_name.go:13: any resource name containing it counts as the NPU request.
NPU_RESOURCE_MARK: Final = "huawei.com/"

# Given a queue name, the lookup error text if Volcano has no such queue, else None.
QueueLookup = Callable[[str], "str | None"]


@dataclass(frozen=True)
class ValidationFailure:
    """The first check the job fails: the Event reason and its message, as the operator writes them."""

    reason: str
    message: str
    sets_condition: bool = True  # v26.0.0+: also the Failed/JobValidFailed condition
    # False for InvalidScaleOutConfig: :49-54 returns a fresh error, the deferred Event (:34-38) sees nil.
    records_event: bool = True

    @property
    def condition_message(self) -> str:
        """The ``JobValidFailed`` condition's message (ascendjob_controller.go:148-155)."""
        return f"{self.reason}: {self.message}"


def validate_job(
    job: Mapping[str, Any], queue_error: QueueLookup | None = None, release: str = DEFAULT_RELEASE
) -> ValidationFailure | None:
    """The first validation failure of the AscendJob, or None when the operator accepts it.

    ``queue_error`` looks a queue up in Volcano; None means gang scheduling is off, so the queue is
    not checked (:81 ``r.Config.EnableGangScheduling``). ``release`` is the job's MindCluster release:
    before 26.0 the legacy reasons and messages (``LEGACY_REASON``) and no condition.
    """
    spec = _mapping(job.get("spec"))
    labels = _mapping(_mapping(job.get("metadata")).get("labels"))
    legacy = not release_at_least(release, NAMED_SINCE)
    name = str(_mapping(job.get("metadata")).get("name") or "")
    failure = (
        _scaling(name, labels, legacy)
        or (None if legacy else _scale_out(labels))
        or _basic_info(spec, queue_error, legacy)
        or _spec(labels, spec.get("replicaSpecs"), legacy)
    )
    if failure is None or not legacy:
        return failure
    return ValidationFailure(LEGACY_REASON[failure.reason], failure.message, sets_condition=False)


def _scaling(name: str, labels: Mapping[str, Any], legacy: bool) -> ValidationFailure | None:
    """scaler.ValidJob (:40-46; scaling/controller.go:51-66, same checks at v7.3.0): with the
    scaling-rule label, whatever its value, the group-name and jobID labels must exist (any value)."""
    if k.LABEL_SCALING_RULE not in labels:
        return None
    for key, what, value in (
        (k.LABEL_SCALING_GROUP, "group name", "the group of job"),
        (k.LABEL_SCALING_JOB_ID, "jobID", "the jobID of job"),
    ):
        if key not in labels:
            hint = "" if legacy else f", please set label of {key}=<{value}>"
            return ValidationFailure(REASON_INVALID_SCALING_CONFIG, f"job {name} has no {what}{hint}")
    return None


def _scale_out(labels: Mapping[str, Any]) -> ValidationFailure | None:
    """CheckAcJobScaleOutTypeLabel (:48-54; utils/job_v2.go:17-29, :53-63; v26.0.0+): a non-blank
    ``scaleout-type``, upper-cased but not trimmed, must be ROCE or UBOE. No Event (see
    ``records_event``)."""
    value = str(labels.get(k.LABEL_SCALE_OUT_TYPE) or "").upper()
    if not value.strip() or value in k.SCALE_OUT_TYPES:
        return None
    message = (
        f"the value of label {k.LABEL_SCALE_OUT_TYPE} is invalid, which should be "
        f"{' or '.join(k.SCALE_OUT_TYPES)}"
    )
    return ValidationFailure(REASON_INVALID_SCALE_OUT_CONFIG, message, records_event=False)


def _basic_info(
    spec: Mapping[str, Any], queue_error: QueueLookup | None, legacy: bool
) -> ValidationFailure | None:
    """validateBasicInfo (:64-92; v7.3.0 :55-83)."""
    if spec.get("replicaSpecs") is None:
        message = "job spec is not valid" if legacy else "replicaSpecs is not set, please modify your job"
        return ValidationFailure(REASON_INVALID_SPECS, message)
    policy = spec.get("successPolicy")
    if policy is not None and policy not in SUCCESS_POLICIES:
        return ValidationFailure(
            REASON_INVALID_SUCCESS_POLICY, 'job success policy is invalid, it must be one of <"", AllWorkers>'
        )
    scheduling = _mapping(spec.get("runPolicy")).get("schedulingPolicy")
    if queue_error is not None and isinstance(scheduling, Mapping):
        queue = str(scheduling.get("queue") or "")
        error = queue_error(queue)
        if error is not None:
            message = (
                error if legacy else f"check queue<{queue}> failed, err: {error}, maybe it is not create"
            )
            return ValidationFailure(REASON_INVALID_QUEUE, message)
    return None


def _spec(labels: Mapping[str, Any], replica_specs: Any, legacy: bool) -> ValidationFailure | None:
    """validateSpec (:98-110): the framework label (api/v1/defaults.go:133-147), then the replicas."""
    frames = "map[" + " ".join(f"{name}:{{}}" for name in sorted(k.FRAMEWORKS)) + "]"  # Go prints maps sorted
    if k.LABEL_FRAMEWORK not in labels:
        hint = "" if legacy else ", please set label framework as one of <pytorch,mindspore,tensorflow>"
        return ValidationFailure(REASON_INVALID_FRAMEWORK, f"framework label is not set{hint}")
    frame = labels[k.LABEL_FRAMEWORK]
    if frame not in k.FRAMEWORKS:
        return ValidationFailure(REASON_INVALID_FRAMEWORK, f"framework label<{frame}> is not in {frames}")
    return _replica_specs(str(frame), _mapping(replica_specs), legacy)


def _replica_specs(frame: str, specs: Mapping[str, Any], legacy: bool) -> ValidationFailure | None:
    """checkReplicaSpecs (:143-194; v7.3.0 :134-184, which checks the replica type after the
    containers)."""
    has_leader = False
    for role, value in specs.items():
        failure = None if legacy else _replica_type(frame, role)
        if failure is not None:
            return failure
        if not isinstance(value, Mapping):
            message = (
                "jobSpec is not valid: nil"
                if legacy
                else f"{role} replicaSpec is not set, please modify your job"
            )
            return ValidationFailure(REASON_INVALID_REPLICA_SPEC, message)
        failure = _replicas(role, value, legacy) or _container_num(role, value, legacy)
        if legacy:
            failure = failure or _replica_type(frame, role)
        if failure is None and role != k.WORKER_ROLE:
            has_leader = True
            failure = _leader(role, value, legacy)
        failure = failure or _ascend_container(role, value, legacy)
        if failure is not None:
            return failure
    if has_leader:
        return None
    if frame != "mindspore":
        message = (
            "ReplicaType is not valid: there need 1 leader replica-type"
            if legacy
            else "replicaType is not valid: there need 1 leader replicaType, Master for pytorch,"
            " Chief of tensorflow"
        )
        return ValidationFailure(REASON_INVALID_REPLICA_TYPE, message)
    if _job_total_request(specs) > 1:
        message = (
            "replicaType is not valid: schdeuler not found, but need 1 while req npu more than 1"
            if legacy
            else "replicaSpec is not valid: when scheduler not found, the req num must be 1"
        )
        return ValidationFailure(REASON_INVALID_REPLICA_SPEC, message)
    return None


def _replica_type(frame: str, role: str) -> ValidationFailure | None:
    """validateReplicaType (:246-258), with getValidReplicaType (:224-244); same text before 26.0."""
    allowed = (k.LEADER_ROLE[frame], k.WORKER_ROLE)
    if role in allowed:
        return None
    return ValidationFailure(
        REASON_INVALID_REPLICA_TYPE, f"replicaType is {role} but must be one of [{' '.join(allowed)}]"
    )


def _replicas(role: str, spec: Mapping[str, Any], legacy: bool) -> ValidationFailure | None:
    """validateReplicas (:122-141; v7.3.0 :113-132, without the role)."""
    replicas = _replica_count(spec)
    if replicas is None:
        return None
    what = "jobSpec is not valid" if legacy else f"{role} replicaSpec is not valid"
    if replicas < 0:
        message = f"{what}: replicas can not be negative num, but got {replicas}"
        return ValidationFailure(REASON_INVALID_REPLICA_SPEC, message)
    if replicas > MAX_REPLICAS:
        message = f"{what}: replicas can not be larger than {MAX_REPLICAS}, but got {replicas}"
        return ValidationFailure(REASON_INVALID_REPLICA_SPEC, message)
    return None


def _container_num(role: str, spec: Mapping[str, Any], legacy: bool) -> ValidationFailure | None:
    """validContainerNum (:112-120; v7.3.0 :103-111)."""
    if _containers(spec):
        return None
    message = (
        f"jobSpec is not valid: containers definition expected in {role}"
        if legacy
        else f"{role} replicaSpec is not valid: containers is undefined"
    )
    return ValidationFailure(REASON_INVALID_REPLICA_SPEC, message)


def _leader(role: str, spec: Mapping[str, Any], legacy: bool) -> ValidationFailure | None:
    """validateLeader (:260-268; v7.3.0 :249-257)."""
    replicas = _replica_count(spec)
    if replicas is not None and replicas != 1:
        message = (
            f"replicaType<{role}> replicas is invalid, it must be only 1"
            if legacy
            else f"{role} replicaSpec is not valid, the replicas must be only 1"
        )
        return ValidationFailure(REASON_INVALID_REPLICA_SPEC, message)
    return None


def _ascend_container(role: str, spec: Mapping[str, Any], legacy: bool) -> ValidationFailure | None:
    """validateContainer (:196-222): a container named ``ascend``, with an image. Before 26.0 every
    container needs an image, whatever its name (v7.3.0 :186-212)."""
    found = False
    for container in _containers(spec):
        named = container.get("name") == k.CONTAINER_NAME
        if not named and not legacy:
            continue
        if not container.get("image"):
            message = (
                f"replicaType is not valid: Image is undefined in the container of {role}"
                if legacy
                else f"{role} replicaSpec is not valid: Image is undefined in the container of "
                f"{k.CONTAINER_NAME}"
            )
            return ValidationFailure(REASON_INVALID_CONTAINER, message)
        found = found or named
    if found:
        return None
    message = (
        f"replicaType is not valid: There is no container named {k.CONTAINER_NAME} in {role}"
        if legacy
        else f"{role} replicaSpec is not valid: There is no container named {k.CONTAINER_NAME}"
    )
    return ValidationFailure(REASON_INVALID_CONTAINER, message)


def _job_total_request(specs: Mapping[str, Any]) -> int:
    """jobTotalRequest (:270-278): NPUs of the ascend container of the Worker replicas, times replicas."""
    worker = _mapping(specs.get(k.WORKER_ROLE))
    replicas = _replica_count(worker)
    for container in _containers(worker):
        if container.get("name") == k.CONTAINER_NAME:  # getReplicaSpecRequestRes (:280-288)
            # specReplicas (utils.go:177-182): no replicas means 1.
            return _npu_request(container) * (1 if replicas is None else replicas)
    return 0


def _npu_request(container: Mapping[str, Any]) -> int:
    """getContainerResourceReq (utils.go:88-95): the first request whose name contains huawei.com/."""
    requests = _mapping(_mapping(container.get("resources")).get("requests"))
    for name, value in requests.items():
        if NPU_RESOURCE_MARK in str(name):
            try:
                return int(str(value))
            except ValueError:
                return 0
    return 0


def _replica_count(spec: Mapping[str, Any]) -> int | None:
    replicas = spec.get("replicas")
    return replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else None


def _containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    pod_spec = _mapping(_mapping(spec.get("template")).get("spec"))
    containers = pod_spec.get("containers")
    return [c for c in containers if isinstance(c, Mapping)] if isinstance(containers, list) else []


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}

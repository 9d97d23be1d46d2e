"""Recovery labels and annotations: which keys the policy owns, and their values for one spec.

These keys live on the AscendJob and are copied by the operator to the PodGroup ``<job>-<uid>`` when
it is created; ClusterD reads them from the PodGroup, so the push also patches that live
(mindcluster.md §1.4, §2, §6.4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apps.policies.spec import PolicySpec
from mindcluster import keys as k

from .plan import RenderPlan

OWNED_LABELS: frozenset[str] = frozenset(
    {
        k.LABEL_FAULT_SCHEDULING,
        k.LABEL_POD_RESCHEDULING,
        k.LABEL_FAULT_RETRY_TIMES,
        k.LABEL_SUB_HEALTHY_STRATEGY,
        k.LABEL_PROCESS_RECOVER_ENABLE,
    }
)
OWNED_ANNOTATIONS: frozenset[str] = frozenset(
    {
        k.ANNOTATION_RECOVER_STRATEGY,
        k.ANNOTATION_WAIT_RESCHEDULE_TIMEOUT,
        k.ANNOTATION_PLATFORM_STRATEGY,
    }
)
ON = "on"
# What ClusterD accepts in ProcessRecoverStrategy before it asks (fault_recover_platform_plugin.go:30-39).
STANDING_ANSWERS = ("retry", "recover", "dump")


def standing_answer(spec: PolicySpec) -> str:
    """The answer kept in ``ProcessRecoverStrategy`` between faults (platform mode).

    ClusterD reads it at every fault before it stops training or asks anything, and waits up to 300 s
    (then code 508) while it is not retry/recover/dump; its *presence* when the job is created is what
    turns platform mode on (``component/clusterd/pkg/domain/common/utils.go:106``). Validation makes
    ``default_strategy`` one of those three; an older revision saved with another value falls back to
    the first configured one, so the answer is never empty.
    """
    if spec.default_strategy in STANDING_ANSWERS:
        return spec.default_strategy
    return next((s for s in STANDING_ANSWERS if s in spec.strategies), "recover")


def owned_keys() -> tuple[frozenset[str], frozenset[str]]:
    """(label keys, annotation keys) a policy owns; a push never touches any other key."""
    return OWNED_LABELS, OWNED_ANNOTATIONS


@dataclass(frozen=True)
class PolicyKeys:
    """Values to set and keys to remove, for the AscendJob and for its PodGroup."""

    labels: dict[str, str]
    annotations: dict[str, str]
    removed_labels: tuple[str, ...]
    removed_annotations: tuple[str, ...]
    podgroup_patch: dict[str, Any]

    def job_metadata_patch(self) -> dict[str, Any]:
        """Merge-patch body for the AscendJob metadata: owned keys set, or None to delete."""
        return {
            "labels": {**self.labels, **dict.fromkeys(self.removed_labels)},
            "annotations": {**self.annotations, **dict.fromkeys(self.removed_annotations)},
        }


def policy_keys(plan: RenderPlan) -> PolicyKeys:
    """The recovery labels/annotations one policy sets, and the owned ones it removes."""
    spec = plan.spec
    labels: dict[str, str] = {}
    if spec.fault_scheduling != "off":  # absent means off; ClusterD/Volcano know no "off" value
        labels[k.LABEL_FAULT_SCHEDULING] = spec.fault_scheduling
    if spec.pod_rescheduling:
        labels[k.LABEL_POD_RESCHEDULING] = ON
    if spec.fault_retry_times > 0:
        labels[k.LABEL_FAULT_RETRY_TIMES] = str(spec.fault_retry_times)
    if spec.sub_healthy_strategy != "ignore":
        labels[k.LABEL_SUB_HEALTHY_STRATEGY] = spec.sub_healthy_strategy
    if plan.strategies and plan.hand_set_recovery_env:
        labels[k.LABEL_PROCESS_RECOVER_ENABLE] = ON

    annotations: dict[str, str] = {}
    if plan.strategies:
        annotations[k.ANNOTATION_RECOVER_STRATEGY] = spec.strategy_annotation
    if plan.waits_for_reschedule:
        annotations[k.ANNOTATION_WAIT_RESCHEDULE_TIMEOUT] = str(spec.wait_reschedule_timeout)
    if spec.platform_mode:
        annotations[k.ANNOTATION_PLATFORM_STRATEGY] = standing_answer(spec)

    removed_labels = tuple(sorted(OWNED_LABELS - labels.keys()))
    removed_annotations = tuple(sorted(OWNED_ANNOTATIONS - annotations.keys()))

    pg_labels: dict[str, str | None] = {**labels, **dict.fromkeys(removed_labels)}
    if not plan.hand_set_recovery_env:
        # From 7.2 the operator sets process-recover-enable on the PodGroup and ClusterD flips it between
        # on and pause during fallback: a push must neither set nor remove it there.
        pg_labels.pop(k.LABEL_PROCESS_RECOVER_ENABLE, None)
    pg_annotations: dict[str, str | None] = {**annotations, **dict.fromkeys(removed_annotations)}
    return PolicyKeys(
        labels=labels,
        annotations=annotations,
        removed_labels=removed_labels,
        removed_annotations=removed_annotations,
        podgroup_patch={"metadata": {"labels": pg_labels, "annotations": pg_annotations}},
    )

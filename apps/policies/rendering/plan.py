"""The decisions every part of a render shares, made once from the spec, the release and the job.

mindcluster.md §8 is the map: up to 7.1 the user sets the recovery env and label by hand; from 7.2 the
operator injects them; from 7.3 PyTorch swaps Elastic Agent for TaskD. MindSpore has used TaskD as its
agent since 7.0, so it is "TaskD era" on every release.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apps.policies.spec import JobContext, PolicySpec, release_at_least
from mindcluster import keys as k
from mindcluster.operator_env import operator_injects_env

PYTORCH = "pytorch"
MINDSPORE = "mindspore"
TENSORFLOW = "tensorflow"

# Strategies whose faulty pod is rescheduled or scaled, so ClusterD waits wait-reschedule-timeout.
RESCHEDULING_STRATEGIES = frozenset({"recover", "recover-in-place", "elastic-training"})


@dataclass(frozen=True)
class RenderPlan:
    """A validated spec plus the job facts rendering depends on."""

    spec: PolicySpec
    framework: str
    job_name: str
    namespace: str | None
    node_nums: int
    proc_per_node: int

    @classmethod
    def build(cls, manifest: dict[str, Any], spec: PolicySpec) -> RenderPlan:
        """Read the job facts once; an unknown framework renders like PyTorch (the validator flags it)."""
        job = JobContext.from_manifest(manifest)
        framework = job.framework if job.framework in (PYTORCH, MINDSPORE, TENSORFLOW) else PYTORCH
        return cls(
            spec=spec,
            framework=framework,
            job_name=job.name or "",
            namespace=job.namespace,
            node_nums=job.node_nums,
            proc_per_node=job.proc_per_node,
        )

    @property
    def release(self) -> str:
        return self.spec.mindcluster_version

    @property
    def strategies(self) -> tuple[str, ...]:
        """Configured strategies in ClusterD priority order."""
        annotation = self.spec.strategy_annotation
        return tuple(annotation.split(",")) if annotation else ()

    @property
    def hot_switch(self) -> bool:
        return self.spec.sub_healthy_strategy == "hotSwitch"

    @property
    def process_machinery(self) -> bool:
        """MindIO and the TaskD/Elastic-Agent recovery path run: any strategy, or hotSwitch (§2, §3.4)."""
        return bool(self.strategies) or self.hot_switch

    @property
    def needs_agent(self) -> bool:
        """The agent patch (Elastic Agent or TaskD) is needed: process-level or Pod-level recovery."""
        return self.process_machinery or self.spec.pod_rescheduling

    @property
    def hand_set_recovery_env(self) -> bool:
        """Up to 7.1 the user sets PROCESS_RECOVER & co. and process-recover-enable; 7.2+: the operator."""
        return not operator_injects_env(self.release)

    @property
    def taskd_era(self) -> bool:
        """TaskD is the job's agent: MindSpore on every release, PyTorch from 7.3."""
        if self.framework == MINDSPORE:
            return True
        return self.framework == PYTORCH and release_at_least(self.release, "7.3")

    @property
    def elastic_agent(self) -> bool:
        """PyTorch up to 7.2 recovers through Elastic Agent (mindx_elastic)."""
        return self.framework == PYTORCH and not release_at_least(self.release, "7.3")

    @property
    def uses_taskd(self) -> bool:
        """A TaskD manager runs for this job (taskd-port 9601 on every pod, manager.py, ConfigMap)."""
        return self.taskd_era and self.needs_agent

    @property
    def waits_for_reschedule(self) -> bool:
        """wait-reschedule-timeout exists from 7.2 and matters only when a pod is moved or scaled."""
        return release_at_least(self.release, "7.2") and bool(RESCHEDULING_STRATEGIES & set(self.strategies))

    @property
    def configmap_name(self) -> str:
        return f"{k.TASKD_MANAGER_CONFIGMAP_PREFIX}{self.job_name}"

    @property
    def leader_role(self) -> str:
        return k.LEADER_ROLE.get(self.framework, k.LEADER_ROLE[PYTORCH])

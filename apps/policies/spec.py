"""The recovery-policy spec (design.md §4.1) and the job facts the rules depend on.

Pure data: no Django, no I/O. ``validation.validate_policy`` turns untrusted JSON into a
``PolicySpec``; rendering and the simulators consume ``PolicySpec`` and ``JobContext``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Final

from mindcluster import keys as k

# The release and strategy vocabulary is MindCluster's own (``mindcluster``); the policy spec speaks
# it, and re-exports it so the product reads one module for "what a policy may say".
from mindcluster.releases import DEFAULT_RELEASE as DEFAULT_RELEASE
from mindcluster.releases import RELEASES as RELEASES
from mindcluster.releases import release_at_least as release_at_least
from mindcluster.strategies import PLATFORM_STRATEGIES as PLATFORM_STRATEGIES
from mindcluster.strategies import PROCESS_STRATEGIES as PROCESS_STRATEGIES
from mindcluster.strategies import STRATEGIES as STRATEGIES
from mindcluster.strategies import STRATEGY_PRIORITY as STRATEGY_PRIORITY
from mindcluster.strategies import STRATEGY_SINCE as STRATEGY_SINCE
from mindcluster.strategies import sort_strategies as sort_strategies

FAULT_SCHEDULING_VALUES: Final = ("grace", "force", "off")
SUB_HEALTHY_VALUES: Final = ("ignore", "graceExit", "forceExit", "hotSwitch")
FRAMEWORKS: Final = ("pytorch", "mindspore", "tensorflow")
# "ask" = a person decides.
DECISION_ACTIONS: Final = (*PLATFORM_STRATEGIES, "ask")
FAULT_TYPES: Final = ("uce", "hccl", "normal", "node")

# Bounds from design.md §4.1.
BOUNDS: Final = {
    "fault_retry_times": (0, 100_000),
    "backoff_limit": (1, 2_147_483_647),
    "max_restarts": (0, 32_767),
    "monitor_interval": (1, 3_600),
    "wait_reschedule_timeout": (30, 270),
    "ttp_port": (1_024, 65_535),
    "decision_timeout_s": (1, 290),
}


@dataclass(frozen=True)
class DecisionRule:
    """One platform-mode rule: the first rule whose ``match`` holds decides."""

    strategy: str  # one of DECISION_ACTIONS
    # Keys, all optional, all must hold: fault_type (list of FAULT_TYPES), fault_level (list of str),
    # min_ranks / max_ranks (int), rank0 (bool), repeat_within_s + min_repeats (int).
    match: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PolicySpec:
    """A validated recovery policy. Build it through ``validation.validate_policy``."""

    mindcluster_version: str = DEFAULT_RELEASE
    strategies: tuple[str, ...] = ()
    fault_scheduling: str = "grace"
    pod_rescheduling: bool = False
    fault_retry_times: int = 0
    backoff_limit: int | None = None
    max_restarts: int = 32_767
    monitor_interval: int = 30
    wait_reschedule_timeout: int = 270
    sub_healthy_strategy: str = "ignore"
    ttp_port: int = 8_000
    platform_mode: bool = False
    decision_rules: tuple[DecisionRule, ...] = ()
    default_strategy: str = "recover"
    decision_timeout_s: int = 240

    @property
    def strategy_annotation(self) -> str:
        """The ``recover-strategy`` value ClusterD parses: priority order, commas, no spaces."""
        return ",".join(sort_strategies(self.strategies))

    @property
    def has_process_strategies(self) -> bool:
        return bool(self.strategies)

    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON form (what is stored in a PolicyRevision and returned by the API)."""
        data = asdict(self)
        data["strategies"] = list(sort_strategies(self.strategies))
        data["decision_rules"] = [
            {"match": dict(rule.match), "strategy": rule.strategy} for rule in self.decision_rules
        ]
        return data


# --- job facts -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReplicaFacts:
    """What the rules need to know about one replica type of an AscendJob."""

    role: str
    replicas: int
    restart_policy: str  # "" when unset (operator default: Never)
    npus_per_pod: int
    container_names: tuple[str, ...]
    env_names: tuple[str, ...]  # env of the ascend container
    host_network: bool = False


@dataclass(frozen=True)
class JobContext:
    """Facts about the job a policy is meant for; every field may be unknown (None/empty)."""

    name: str | None = None
    namespace: str | None = None
    framework: str | None = None
    mindcluster_version: str | None = None
    scheduler_name: str | None = None
    replicas: tuple[ReplicaFacts, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def node_nums(self) -> int:
        """Total pods in the job (``init_taskd_manager`` ``node_nums``)."""
        return sum(r.replicas for r in self.replicas)

    @property
    def proc_per_node(self) -> int:
        """Training processes per pod = NPUs requested per pod (the largest across roles)."""
        return max((r.npus_per_pod for r in self.replicas), default=0)

    @classmethod
    def from_manifest(cls, manifest: Any) -> JobContext:
        """Read what can be read from an AscendJob manifest; tolerate any shape without raising."""
        if not isinstance(manifest, dict):
            return cls()
        meta = _as_dict(manifest.get("metadata"))
        spec = _as_dict(manifest.get("spec"))
        labels = {str(key): str(v) for key, v in _as_dict(meta.get("labels")).items()}
        annotations = {str(key): str(v) for key, v in _as_dict(meta.get("annotations")).items()}
        replicas = tuple(
            _replica_facts(str(role), _as_dict(rspec))
            for role, rspec in _as_dict(spec.get("replicaSpecs")).items()
        )
        name = meta.get("name")
        namespace = meta.get("namespace")
        scheduler = spec.get("schedulerName")
        return cls(
            name=name if isinstance(name, str) else None,
            namespace=namespace if isinstance(namespace, str) else None,
            framework=labels.get(k.LABEL_FRAMEWORK),
            scheduler_name=scheduler if isinstance(scheduler, str) else None,
            replicas=replicas,
            labels=labels,
            annotations=annotations,
        )


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def npus_in(resources: Any) -> int:
    """NPUs a container asks for: requests (or limits) of ``huawei.com/Ascend*`` / ``huawei.com/npu*``."""
    res = _as_dict(resources)
    for section in ("requests", "limits"):
        total = 0
        for key, value in _as_dict(res.get(section)).items():
            if str(key).startswith(k.NPU_RESOURCE_PREFIXES):
                try:
                    total += int(str(value))
                except ValueError:
                    continue
        if total:
            return total
    return 0


def _replica_facts(role: str, rspec: dict[str, Any]) -> ReplicaFacts:
    pod_spec = _as_dict(_as_dict(rspec.get("template")).get("spec"))
    containers = [_as_dict(c) for c in _as_list(pod_spec.get("containers"))]
    names = tuple(str(c.get("name", "")) for c in containers)
    ascend = next((c for c in containers if c.get("name") == k.CONTAINER_NAME), {})
    env_names = tuple(str(_as_dict(e).get("name", "")) for e in _as_list(ascend.get("env")))
    raw_replicas = rspec.get("replicas", 1)
    replicas = raw_replicas if isinstance(raw_replicas, int) and not isinstance(raw_replicas, bool) else 1
    restart = rspec.get("restartPolicy", "")
    return ReplicaFacts(
        role=role,
        replicas=replicas,
        restart_policy=restart if isinstance(restart, str) else "",
        npus_per_pod=sum(npus_in(c.get("resources")) for c in containers),
        container_names=names,
        env_names=env_names,
        host_network=pod_spec.get("hostNetwork") is True,
    )

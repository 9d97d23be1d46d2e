"""What an AscendJob manifest says about its job: the facts policy rules and rendering depend on.

Pure: reads any manifest shape without raising; no Django, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mindcluster import keys as k


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

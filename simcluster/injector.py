"""Fault requests: what can be injected into the simulated cluster, parsed and checked once.

Used by ``SimCluster.inject_fault``, the control endpoint (``POST /faults``), ``sim_fault`` and the
scenario runner, so every entry point reports the same clear errors for bad input.
"""

from __future__ import annotations

import itertools
import random
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from mindcluster import faults as vocab
from mindcluster.faults import FAULT_HCCL, FAULT_OTHER, FAULT_UCE

FAULT_KINDS: Final = ("uce", "hccl", "normal", "node")
# kind → (FaultRank.faultType, default fault code, default handling level, node-level?)
# "normal" with no level is a business-process exception reported by TaskD (software fault).
FAULT_DEFAULTS: Final = {
    "uce": (FAULT_UCE, vocab.CODE_HBM_DOUBLE_BIT, vocab.RESTART_BUSINESS, False),
    "hccl": (FAULT_HCCL, vocab.CODE_HCCL_RETRY, vocab.RESTART_REQUEST, False),
    "normal": (FAULT_OTHER, "", "", False),
    "node": (FAULT_OTHER, "", vocab.SEPARATE_FAULT, True),
}
KNOWN_LEVELS: Final = vocab.CHIP_LEVELS  # the levels a chip or node fault is injected with
_CODE = re.compile(r"^[0-9A-Fa-f]{1,16}$")
_ALLOWED_KEYS: Final = {
    "namespace",
    "job",
    "rank",
    "type",
    "fault_type",
    "code",
    "level",
    "recovers",
    "device",
}
_ids = itertools.count(1)
_ids_lock = threading.Lock()


class FaultSpecError(ValueError):
    """Bad fault input; the message says which field and why."""


class UnknownJobError(LookupError):
    """The fault names a job the cluster does not have."""


@dataclass(frozen=True)
class FaultSpec:
    """One fault to inject into one pod of one job."""

    namespace: str
    job: str
    rank: int  # pod rank (hccl/rankIndex)
    kind: str = "normal"  # one of FAULT_KINDS
    code: str | None = None
    level: str | None = None
    recovers: bool | tuple[bool, ...] | None = None  # None = random (seeded)
    device: int = 0
    id: str = field(default_factory=lambda: new_fault_id())

    @property
    def fault_type(self) -> str:
        return FAULT_DEFAULTS[self.kind][0]

    @property
    def effective_code(self) -> str:
        return self.code if self.code is not None else FAULT_DEFAULTS[self.kind][1]

    @property
    def effective_level(self) -> str:
        return self.level if self.level is not None else FAULT_DEFAULTS[self.kind][2]

    @property
    def node_fault(self) -> bool:
        return FAULT_DEFAULTS[self.kind][3]

    def outcome(self, attempt: int, rng: random.Random, success_rate: float = 0.7) -> bool:
        """Whether recovery attempt ``attempt`` (1-based) succeeds."""
        if self.recovers is None:
            return rng.random() < success_rate
        if isinstance(self.recovers, bool):
            return self.recovers
        return self.recovers[min(attempt, len(self.recovers)) - 1]


def new_fault_id() -> str:
    with _ids_lock:
        return f"fault-{next(_ids)}"


def parse_job_ref(value: Any) -> tuple[str, str]:
    """``NAMESPACE/JOB`` (or ``JOB`` in ``default``) → (namespace, name)."""
    if not isinstance(value, str) or not value.strip():
        raise FaultSpecError("job: expected 'NAMESPACE/JOB', got " + repr(value))
    namespace, _, name = value.strip().rpartition("/")
    namespace = namespace or "default"
    if not name or "/" in namespace:
        raise FaultSpecError(f"job: expected 'NAMESPACE/JOB', got {value!r}")
    return namespace, name


def _parse_recovers(value: Any) -> bool | tuple[bool, ...] | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, list) and value and all(isinstance(v, bool) for v in value):
        return tuple(value)
    raise FaultSpecError(
        f"recovers: expected true, false, null or a non-empty list of booleans, got {value!r}"
    )


def parse_fault(data: Any) -> FaultSpec:
    """Build a ``FaultSpec`` from untrusted JSON/YAML; raises ``FaultSpecError`` with a clear message."""
    if not isinstance(data, Mapping):
        raise FaultSpecError(f"a fault must be an object, got {type(data).__name__}")
    unknown = sorted(set(map(str, data)) - _ALLOWED_KEYS - {"at_s"})
    if unknown:
        raise FaultSpecError(f"unknown field(s) {unknown}; allowed: {sorted(_ALLOWED_KEYS)}")
    if "namespace" in data and data.get("namespace") is not None:
        namespace, name = str(data["namespace"]), data.get("job")
        if not isinstance(name, str) or not name:
            raise FaultSpecError(f"job: expected a job name, got {name!r}")
        if "/" in name:
            namespace, name = parse_job_ref(name)
    else:
        namespace, name = parse_job_ref(data.get("job"))
    rank = data.get("rank", 0)
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise FaultSpecError(f"rank: expected a pod rank (integer >= 0), got {rank!r}")
    kind = data.get("type", data.get("fault_type", "normal"))
    if kind not in FAULT_KINDS:
        raise FaultSpecError(f"type: expected one of {list(FAULT_KINDS)}, got {kind!r}")
    code = data.get("code")
    if code is not None and (not isinstance(code, str) or not _CODE.match(code)):
        raise FaultSpecError(f"code: expected a hexadecimal fault code such as '80E01801', got {code!r}")
    level = data.get("level")
    if level is not None and level not in KNOWN_LEVELS:
        raise FaultSpecError(f"level: expected one of {list(KNOWN_LEVELS)}, got {level!r}")
    device = data.get("device", 0)
    if isinstance(device, bool) or not isinstance(device, int) or device < 0:
        raise FaultSpecError(f"device: expected an integer >= 0, got {device!r}")
    return FaultSpec(
        namespace=namespace,
        job=name,
        rank=rank,
        kind=kind,
        code=code,
        level=level,
        recovers=_parse_recovers(data.get("recovers")),
        device=device,
    )

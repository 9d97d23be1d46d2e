"""ClusterD's ``fault.Fault`` stream: each signal is the whole current fault set of one job.

ClusterD sends the full state again on every subscribe, so a signal is diffed against the fault set
stored for that job: only a device fault that was not there before is a detection.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apps.clusterd.client import FaultSignal
from apps.events import kinds
from apps.ingest.observation import JobRef, Observation

SOURCE = "clusterd"
NORMAL = "normal"


def signal_state(signal: FaultSignal) -> dict[str, Any]:
    """``{"faults": {"<node>|<device>|<codes>": level}}`` (empty for a ``normal`` signal)."""
    faults: dict[str, str] = {}
    if signal.signal_type != NORMAL:
        for node in signal.nodes:
            for device in node.devices:
                faults[f"{node.node_name}|{device.identity}"] = device.level or node.level
    return {"faults": faults}


def fault_observations(
    previous: dict[str, Any], signal: FaultSignal, received_at: datetime
) -> tuple[dict[str, Any], list[Observation]]:
    """New state and one ``fault.detected`` per device fault that is new since ``previous``."""
    state = signal_state(signal)
    before = previous.get("faults") or {}
    found: list[Observation] = []
    if signal.signal_type == NORMAL:
        return state, found
    job = JobRef(namespace="", uid=signal.job_id)
    for node in signal.nodes:
        for device in node.devices:
            identity = f"{node.node_name}|{device.identity}"
            if identity in before:
                continue
            code = device.codes[0].upper() if device.codes else ""
            level = device.level or node.level
            data: dict[str, Any] = {
                "node": node.node_name,
                "node_ip": node.node_ip,
                "node_level": node.level,
                "device": device.device_id,
                "device_type": device.device_type,
                "code": code,
                "codes": [c.upper() for c in device.codes],
                "level": level,
            }
            if device.fault_types:
                data["fault_type"] = device.fault_types[0]
            if device.reasons:
                data["fault_reasons"] = list(device.reasons)
            where = "node" if device.device_id == "-1" else f"device {device.device_id}"
            found.append(
                Observation(
                    job=job,
                    kind=kinds.FAULT_DETECTED,
                    message=f"ClusterD: {where} on {node.node_name} faulty "
                    f"(code {code or '-'}, level {level or '-'})",
                    source=SOURCE,
                    data=data,
                    dedupe_key=f"grpc:{signal.uuid}:{identity}",
                    occurred_at=received_at,
                )
            )
    return state, found

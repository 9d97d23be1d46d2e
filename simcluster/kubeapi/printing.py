"""Server-side printing: the ``meta.k8s.io/v1`` Table a real API server returns to ``kubectl get``.

Columns follow the apiserver's printers (``pkg/printers/internalversion/printers.go``): pods NAME /
READY / STATUS / RESTARTS / AGE (+ IP / NODE / NOMINATED NODE / READINESS GATES at priority 1, i.e.
``-o wide``), events LAST SEEN / TYPE / REASON / OBJECT / MESSAGE, and for custom resources the CRD's
``additionalPrinterColumns`` (AscendJob: State, Age, from the real CRD).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

Column = dict[str, Any]
Row = list[Any]


def _col(name: str, type_: str = "string", *, priority: int = 0, fmt: str = "", desc: str = "") -> Column:
    col = {"name": name, "type": type_, "format": fmt, "description": desc or name, "priority": priority}
    if name == "Name":
        col["format"] = "name"
    return col


def age(timestamp: str | None, now: datetime | None = None) -> str:
    """``duration.HumanDuration`` as kubectl prints it (``5s``, ``3m2s``, ``2d4h``)."""
    if not timestamp:
        return "<unknown>"
    try:
        # RFC 3339, with or without fractional seconds / offset (the simulator writes both).
        then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
        then = then if then.tzinfo else then.replace(tzinfo=UTC)
    except ValueError:
        return "<invalid>"
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest and hours < 8 else f"{hours}h"
    days = hours // 24
    if days < 8:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
    return f"{days}d"


# --- pods -----------------------------------------------------------------------------------------
POD_COLUMNS = [
    _col("Name"),
    _col("Ready", desc="The aggregate readiness state of this pod for accepting traffic."),
    _col("Status", desc="The aggregate status of the containers in this pod."),
    _col("Restarts", desc="The number of times the containers in this pod have been restarted."),
    _col("Age"),
    _col("IP", priority=1, desc="The IP address assigned to the pod"),
    _col("Node", priority=1, desc="The name of the node to which the pod is assigned"),
    _col("Nominated Node", priority=1),
    _col("Readiness Gates", priority=1),
]


def pod_row(pod: dict[str, Any]) -> Row:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    containers = spec.get("containers") or []
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    if not statuses and status.get("phase") == "Running":
        ready = len(containers)  # the simulator does not always fill containerStatuses
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
    reason = status.get("reason") or status.get("phase") or "Pending"
    for s in statuses:
        waiting = (s.get("state") or {}).get("waiting")
        terminated = (s.get("state") or {}).get("terminated")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated and terminated.get("reason"):
            reason = terminated["reason"]
    if meta.get("deletionTimestamp"):
        reason = "Terminating"
    restart_text = str(restarts)
    last = max(
        (((s.get("lastState") or {}).get("terminated") or {}).get("finishedAt") or "" for s in statuses),
        default="",
    )
    if restarts and last:
        restart_text = f"{restarts} ({age(last)} ago)"
    return [
        meta["name"],
        f"{ready}/{len(containers)}",
        reason,
        restart_text,
        age(meta.get("creationTimestamp")),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        "<none>",
    ]


# --- events ---------------------------------------------------------------------------------------
EVENT_COLUMNS = [
    _col("Last Seen"),
    _col("Type"),
    _col("Reason"),
    _col("Object"),
    _col("Subobject", priority=1),
    _col("Source", priority=1),
    _col("Message"),
    _col("First Seen", priority=1),
    _col("Count", priority=1),
    _col("Name", priority=1),
]


def event_row(event: dict[str, Any]) -> Row:
    obj = event.get("involvedObject") or {}
    source = event.get("source") or {}
    last = event.get("lastTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp")
    first = event.get("firstTimestamp") or last
    return [
        age(last),
        event.get("type") or "",
        event.get("reason") or "",
        f"{str(obj.get('kind') or '').lower()}/{obj.get('name') or ''}",
        obj.get("fieldPath") or "",
        ", ".join(v for v in (source.get("component"), source.get("host")) if v)
        or event.get("reportingComponent")
        or "",
        (event.get("message") or "").strip(),
        age(first),
        str(event.get("count") or 1),
        event["metadata"]["name"],
    ]


# --- custom resources: JSONPath columns -----------------------------------------------------------
def _jsonpath(obj: Any, path: str) -> Any:
    """The subset of JSONPath CRD printer columns use: ``.a.b``, ``[n]``, ``[-1:]``."""
    current: Any = obj
    for token in path.replace("[", ".[").split("."):
        if not token:
            continue
        if token.startswith("["):
            inner = token[1:-1]
            if not isinstance(current, list):
                return None
            if inner.endswith(":"):
                start = int(inner[:-1])
                current = current[start:]
                current = current[0] if len(current) == 1 else (current or None)
            else:
                index = int(inner)
                current = current[index] if -len(current) <= index < len(current) else None
        elif isinstance(current, dict):
            current = current.get(token)
        else:
            return None
        if current is None:
            return None
    return current


def crd_columns(printer_columns: list[dict[str, Any]]) -> list[Column]:
    cols = [_col("Name")]
    for pc in printer_columns:
        cols.append(
            _col(
                pc["name"],
                "string" if pc.get("type") == "date" else pc.get("type", "string"),
                priority=int(pc.get("priority", 0)),
                fmt=pc.get("format", ""),
                desc=pc.get("description", pc["name"]),
            )
        )
    return cols


def crd_row(printer_columns: list[dict[str, Any]], obj: dict[str, Any]) -> Row:
    row: Row = [obj["metadata"]["name"]]
    for pc in printer_columns:
        value = _jsonpath(obj, pc["jsonPath"])
        if pc.get("type") == "date":
            row.append(age(value) if isinstance(value, str) else "<unknown>")
        elif value is None:
            row.append(None)
        elif isinstance(value, dict | list):
            row.append(json.dumps(value))
        else:
            row.append(value)
    return row


# --- everything else ------------------------------------------------------------------------------
DEFAULT_COLUMNS = [
    _col("Name"),
    _col("Age", desc="CreationTimestamp is a timestamp representing the server time"),
]


def default_row(obj: dict[str, Any]) -> Row:
    return [obj["metadata"]["name"], age(obj["metadata"].get("creationTimestamp"))]


NAMESPACE_COLUMNS = [_col("Name"), _col("Status"), _col("Age")]


def namespace_row(obj: dict[str, Any]) -> Row:
    return [obj["metadata"]["name"], (obj.get("status") or {}).get("phase", ""), default_row(obj)[1]]


CONFIGMAP_COLUMNS = [_col("Name"), _col("Data", "integer"), _col("Age")]


def configmap_row(obj: dict[str, Any]) -> Row:
    data = len(obj.get("data") or {}) + len(obj.get("binaryData") or {})
    return [obj["metadata"]["name"], data, default_row(obj)[1]]


PODGROUP_COLUMNS = [
    _col("Name"),
    _col("Status"),
    _col("MinMember", "integer"),
    _col("Running", "integer"),
    _col("Age"),
    _col("Queue", priority=1),
]


def podgroup_row(obj: dict[str, Any]) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return [
        obj["metadata"]["name"],
        status.get("phase") or "",
        spec.get("minMember"),
        status.get("running"),
        default_row(obj)[1],
        spec.get("queue") or "",
    ]


def printer_for(
    kind: str, crd_printer_columns: list[dict[str, Any]] | None = None
) -> tuple[list[Column], Callable[[dict[str, Any]], Row]]:
    """(columns, row function) for a kind."""
    if crd_printer_columns is not None:
        return crd_columns(crd_printer_columns), lambda o: crd_row(crd_printer_columns, o)
    return {
        "Pod": (POD_COLUMNS, pod_row),
        "Event": (EVENT_COLUMNS, event_row),
        "Namespace": (NAMESPACE_COLUMNS, namespace_row),
        "ConfigMap": (CONFIGMAP_COLUMNS, configmap_row),
        "PodGroup": (PODGROUP_COLUMNS, podgroup_row),
    }.get(kind, (DEFAULT_COLUMNS, default_row))


def wants_table(accept: str | None) -> bool:
    """True when the client asked for ``application/json;as=Table;g=meta.k8s.io`` (v1 or v1beta1)."""
    if not accept:
        return False
    for part in accept.split(","):
        params = {
            p.split("=", 1)[0].strip(): p.split("=", 1)[1].strip() for p in part.split(";")[1:] if "=" in p
        }
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io":
            return True
    return False


def table_version(accept: str | None) -> str:
    for part in (accept or "").split(","):
        if "as=Table" in part and "v=v1beta1" in part and "v=v1;" not in part + ";":
            return "meta.k8s.io/v1beta1"
    return "meta.k8s.io/v1"


def partial_metadata(obj: dict[str, Any], api_version: str) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": obj["metadata"]}


def table(
    objects: list[dict[str, Any]],
    kind: str,
    *,
    crd_printer_columns: list[dict[str, Any]] | None = None,
    list_meta: dict[str, Any] | None = None,
    include_object: str = "Metadata",
    api_version: str = "meta.k8s.io/v1",
    with_columns: bool = True,
) -> dict[str, Any]:
    columns, row_of = printer_for(kind, crd_printer_columns)
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": row_of(obj)}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = partial_metadata(obj, "meta.k8s.io/v1")
        rows.append(row)
    out: dict[str, Any] = {"kind": "Table", "apiVersion": api_version, "metadata": list_meta or {}}
    if with_columns:
        out["columnDefinitions"] = columns
    out["rows"] = rows
    return out

"""``GET …/pods/{name}/log``: a simulated training log per pod, told from what the cluster shows.

Nothing runs in the pods, so the log is derived at request time from the API server's own state:
the container's start time (steps and loss advance with wall time), the Events about the pod's job,
its PodGroup and the pod (ClusterD's fault / strategy / recovery events, the operator's), and the
PodGroup's ``ProcessRecoverStatus``. So ``kubectl logs -f`` tells the story the control plane's
timeline tells: fault detected, strategy received, processes stopped, restarted, resumed from step N.
``previous`` is the log of the container before its last restart (the pod's previous incarnation,
kept by the emulator when the pod was deleted).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

STEP_SECONDS = 2.0  # one simulated training step every 2 s of wall time
CHECKPOINT_EVERY = 50  # a restarted container resumes from the last multiple of this
_ISO = "%Y-%m-%dT%H:%M:%SZ"

# Event reason → how TaskD / the Elastic Agent in the container would put it. Reasons not listed are
# printed as ClusterD notifications.
_PHRASES: dict[str, str] = {
    "FaultDetected": "[TaskD] fault detected by ClusterD: {message}",
    "TaskDStrategies": "[TaskD] reported supported strategies: {message}",
    "StrategyChosen": "[TaskD] strategy received from ClusterD: {message}",
    "PlatformStrategy": "[TaskD] strategy received from the platform: {message}",
    "WaitingForPlatform": "[TaskD] waiting for the platform's decision: {message}",
    "ProcessExited": "[Elastic Agent] training processes stopped: {message}",
    "RecoverSucceeded": "[Elastic Agent] training processes restarted, recovery done: {message}",
    "RecoverFailed": "[Elastic Agent] recovery failed: {message}",
    "JobFailed": "[TaskD] job failed: {message}",
    "Killing": "[Elastic Agent] received SIGTERM, stopping training processes",
}


_NOT_IN_LOG = frozenset({"SuccessfulCreatePod", "Scheduled", "Pulled", "Created", "Started"})


def _parse(ts: str | None) -> datetime | None:
    if not ts:
        return None
    try:
        moment = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _loss(seed: str, step: int) -> float:
    noise = int(hashlib.sha256(f"{seed}:{step}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF - 0.5
    return max(0.05, 10.5 * math.exp(-step / 400) + 1.2 + 0.08 * noise)


def _env(pod: dict[str, Any], name: str) -> str | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        for entry in container.get("env") or []:
            if entry.get("name") == name and "value" in entry:
                return str(entry["value"])
    return None


def _job_of(pod: dict[str, Any]) -> str | None:
    return ((pod.get("metadata") or {}).get("labels") or {}).get("job-name")


def _related_events(store: Any, pod: dict[str, Any]) -> list[dict[str, Any]]:
    from simcluster.kubeapi.resources import EVENTS

    meta = pod["metadata"]
    job = _job_of(pod)
    group = (meta.get("annotations") or {}).get("scheduling.k8s.io/group-name")
    names = {n for n in (job, group) if n}
    out = []
    for stored in store.current(EVENTS, meta.get("namespace", "default")):
        ev = stored.obj
        involved = ev.get("involvedObject") or {}
        if (involved.get("kind") in ("AscendJob", "PodGroup") and involved.get("name") in names) or (
            involved.get("kind") == "Pod" and involved.get("uid") == meta.get("uid")
        ):
            out.append(ev)
    return out


def _resume_step(history: list[dict[str, Any]], pod: dict[str, Any]) -> int:
    """The step a recreated container resumes from: the last checkpoint of its previous incarnation."""
    if not history:
        return 0
    prev = history[-1]
    start = _started(prev)
    end = _parse(prev["metadata"].get("deletionTimestamp"))
    if start is None or end is None:
        return 0
    reached = _resume_step(history[:-1], prev) + int((end - start).total_seconds() / STEP_SECONDS)
    return (reached // CHECKPOINT_EVERY) * CHECKPOINT_EVERY


def _started(pod: dict[str, Any]) -> datetime | None:
    status = pod.get("status") or {}
    return _parse(status.get("startTime")) or _parse(pod["metadata"].get("creationTimestamp"))


def render(
    store: Any,
    pod: dict[str, Any],
    history: list[dict[str, Any]],
    *,
    until: datetime | None = None,
) -> list[tuple[datetime, str]]:
    """(time, line) for the container's whole log up to ``until`` (now for a live container)."""
    meta = pod["metadata"]
    start = _started(pod) or datetime.now(UTC)
    end = until or _parse(meta.get("deletionTimestamp")) or datetime.now(UTC)
    first = _resume_step(history, pod)
    rank = (meta.get("annotations") or {}).get("hccl/rankIndex", "0")
    job = _job_of(pod) or meta["name"]
    lines: list[tuple[datetime, str]] = [
        (start, f"[TaskD] pod {meta['name']} rank {rank} of job {meta.get('namespace')}/{job} started"),
        (
            start,
            "[TaskD] MINDX_TASK_ID={} HIGH_AVAILABILITY={} MS_ENABLE_TFT={} PROCESS_RECOVER={}".format(
                _env(pod, "MINDX_TASK_ID") or "-",
                _env(pod, "HIGH_AVAILABILITY") or "-",
                _env(pod, "MS_ENABLE_TFT") or "-",
                _env(pod, "PROCESS_RECOVER") or "off",
            ),
        ),
        (start, "[Elastic Agent] connected to ClusterD, training processes started"),
    ]
    if first:
        lines.append((start, f"[Elastic Agent] loaded checkpoint, resumed from step {first}"))
    elapsed = max(0.0, (end - start).total_seconds())
    steps = int(elapsed / STEP_SECONDS)
    seed = meta.get("uid") or meta["name"]
    for i in range(1, steps + 1):
        step = first + i
        at = start.timestamp() + i * STEP_SECONDS
        lines.append(
            (
                datetime.fromtimestamp(at, UTC),
                f"step {step} | loss {_loss(seed, step):.4f} | lr 1.0e-04 | {STEP_SECONDS:.1f} s/step",
            )
        )
    for ev in _related_events(store, pod):
        lifecycle = (ev.get("source") or {}).get("component") in ("kubelet", "volcano")
        if ev.get("reason") != "Killing" and (ev.get("reason") in _NOT_IN_LOG or lifecycle):
            continue  # scheduling / container lifecycle: kubectl describe shows those, not the log
        when = _parse(
            ev.get("lastTimestamp") or ev.get("eventTime") or ev["metadata"].get("creationTimestamp")
        )
        if when is None or when < start.replace(microsecond=0) or when > end:
            continue
        template = _PHRASES.get(ev.get("reason", ""), "[TaskD] ClusterD notice {reason}: {message}")
        text = template.format(reason=ev.get("reason", ""), message=(ev.get("message") or "").strip())
        lines.append((when, text))
        if ev.get("reason") in ("RecoverSucceeded",):
            step = first + int((when - start).total_seconds() / STEP_SECONDS)
            lines.append((when, f"[Elastic Agent] resumed training from step {step}"))
    lines.sort(key=lambda item: item[0])
    return lines


def _format(lines: list[tuple[datetime, str]], timestamps: bool) -> bytes:
    if timestamps:
        return "".join(f"{t.strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {text}\n" for t, text in lines).encode()
    return "".join(f"{text}\n" for _, text in lines).encode()


def _bad(message: str) -> web.Response:
    from simcluster.kubeapi.errors import ApiError
    from simcluster.kubeapi.responses import error_response

    return error_response(ApiError(400, message))


async def serve(
    request: web.Request,
    store: Any,
    namespace: str,
    name: str,
    pod_history: dict[tuple[str, str], list[dict[str, Any]]],
) -> web.StreamResponse:
    from simcluster.kubeapi import errors
    from simcluster.kubeapi.resources import PODS
    from simcluster.kubeapi.responses import error_response

    stored = store.get(PODS, namespace, name)
    if stored is None:
        return error_response(errors.not_found("pods", "", name))
    pod = stored.obj
    query = request.query
    containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    container = query.get("container") or (containers[0] if containers else "")
    if container not in containers:
        return _bad(f"container {container} is not valid for pod {name}")
    try:
        tail = int(query["tailLines"]) if query.get("tailLines") else None
    except ValueError:
        return _bad(f"invalid value for tailLines: {query.get('tailLines')!r}")
    timestamps = query.get("timestamps") in ("true", "1")
    history = pod_history.get((namespace, name), [])
    if query.get("previous") in ("true", "1"):
        if not history:
            return _bad(f'previous terminated container "{container}" in pod "{name}" not found')
        lines = render(store, history[-1], history[:-1])
        if tail is not None:
            lines = lines[-tail:] if tail else []
        return web.Response(body=_format(lines, timestamps), content_type="text/plain")
    if (pod.get("status") or {}).get("phase") == "Pending":
        return _bad(f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating')
    lines = render(store, pod, history)
    if tail is not None:
        lines = lines[-tail:] if tail else []
    if query.get("follow") not in ("true", "1"):
        return web.Response(body=_format(lines, timestamps), content_type="text/plain")
    resp = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    seen = {(t, text) for t, text in render(store, pod, history)}
    with contextlib.suppress(ConnectionError, RuntimeError, asyncio.CancelledError):
        await resp.write(_format(lines, timestamps))
        uid = pod["metadata"].get("uid")
        while True:
            await asyncio.sleep(0.5)
            current = store.get(PODS, namespace, name)
            if current is None or current.obj["metadata"].get("uid") != uid:
                break  # the container is gone: a real follow ends when the container exits
            fresh = [item for item in render(store, current.obj, history) if item not in seen]
            seen.update(fresh)
            if fresh:
                await resp.write(_format(fresh, timestamps))
        await resp.write_eof()
    return resp

"""Fault storms in a fleet-sized built-in cluster, through the real ingester (issue #27).

    .venv/bin/python bench/bench_storm.py [--mode storm|sustained|both] [--jobs 200] [--nodes 1000]
                                          [--minutes 10] [--rate 50] [--kill-at 300] [--clock-speed 1]
                                          [--settle 120]

Each simulated cluster runs in its own process (``manage.py simcluster --scenario`` with a
``fleet:``: ``--nodes`` nodes x 8 NPUs, ``--jobs`` running AscendJobs of 4 pods); each cluster has
its own ``manage.py ingest --cluster NAME`` (production settings, its ClusterD gRPC stream on), a
private Redis carries the broadcasts. In this process a bare watch of the cluster's Events (the
official client, raw JSON lines: no model decoding) notes when each fault's ``FaultDetected`` Event
reached a client: the baseline. A fault's *added latency* is the time the product first had it
minus that moment: its ``fault.detected`` event's ``stored_at``, or, for a fault that joined a
recovery in progress (added to that incident, no event of its own), the moment a poll of the
incidents (every 0.25 s) first found it there.

- ``storm``: every job of one cluster faults at once (one scenario of ``--jobs`` UCE/HCCL faults at
  ``at_s: 0``). Checked: every fault is in exactly one incident; goal added p99 ≤ 1 s.
- ``sustained``: two clusters, two ingester processes competing for both clusters' leases as the
  deployed replicas do (the fair share gives each one cluster), ``--rate`` faults/s in all (half
  each) for ``--minutes``. With ``--kill-at S``, the holder of the first cluster gets ``kill -9`` S s
  in: reported are the takeover (kill → the survivor holds that cluster's lease, from its /metrics;
  goal ≤ 10 s) and the orphaned cluster's faults of the next 15 s (added latency, missing).
  Reported: lag p50/p99 (as above), lost (in no incident ``--settle`` s after the last fault),
  duplicated (in more than one incident, or stored as ``fault.detected`` twice); goal
  lag p99 ≤ 2 s, 0 lost, 0 duplicated. Also the injection pace reached and the simulators' CPU
  per fault; and what each ingester spent per fault (its CPU, and from its /metrics the items,
  transactions and SQL statements its applier stored and issued, and the wall time storing them).

- ``--strict``: the simulated ClusterD writes no Kubernetes Events, as the real one
  (``SIM_CLUSTERD_EVENTS=0``; ``component/clusterd`` has no event recorder), so there is no
  ``FaultDetected`` Event to time against. The baseline is then the real first report: a bare
  subscriber to ClusterD's ``fault.Fault`` stream in this process. In storm mode it notes when each
  job's fault signal arrived and the product's time is its first ``fault.detected`` of that job (one
  fault per job, so faults are matched by job). In sustained mode jobs fault again and again, so it
  notes when each fault first appeared in a signal, by the fault's id, and the product's time for a
  fault is the one described above. Real ClusterD leaves a device's ``faultReason`` empty; the strict
  storm's simulators do too, the sustained run's name the fault there (``SIM_CLUSTERD_FAULT_IDS=1``),
  the only way to match what was injected with what was signalled. The product reads such an id only
  to match a report with the incident that already holds its fault.

Every process it starts is stopped whatever happens (``_common.spawn``); the load average is
recorded beside the figures, since the machine may be shared.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _common
from _common import REPO, emit, free_port, fresh_database, product_env, start_redis, summary, wait_port

GOAL_STORM_P99_S = 1.0
GOAL_SUSTAINED_P99_S = 2.0
GOAL_TAKEOVER_S = 10.0
KILL_WINDOW_S = 15.0  # after a kill, the orphaned cluster's faults of this window are reported apart
NAMESPACE = "fleet"
INJECT_LANES = 4  # injecting threads per cluster


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _uptime() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@dataclass
class Sim:
    """One simulated cluster in its own process."""

    name: str
    kubeconfig: Path
    proc: Any
    grpc_port: int
    control_url: str = ""
    seen: dict[str, float] = field(default_factory=dict)  # fault id → bare watch saw its Event (epoch s)
    signalled: dict[str, float] = field(default_factory=dict)  # job uid → bare subscriber saw its fault
    by_fault_id: bool = False  # strict sustained: the bare subscriber fills ``seen`` by fault id
    injected: dict[str, float] = field(default_factory=dict)  # fault id → injected (epoch s)
    poller: IncidentPoller | None = None

    def post(self, path: str, body: bytes, content_type: str) -> Any:
        request = urllib.request.Request(
            self.control_url + path, data=body, headers={"Content-Type": content_type}
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())


def start_sim(
    name: str, args: argparse.Namespace, env: dict[str, str], workdir: Path, fault_ids: bool = False
) -> Sim:
    """A simulated cluster; strict: without ClusterD Events and, unless ``fault_ids``, without the fault
    ids in ClusterD's signals (a real ClusterD sends neither)."""
    api_port, grpc_port, control_port = free_port(), free_port(), free_port()
    kubeconfig = workdir / f"{name}.kubeconfig"
    scenario = workdir / f"{name}-fleet.yaml"
    scenario.write_text(
        json.dumps({"fleet": {"nodes": args.nodes, "jobs": args.jobs, "namespace": NAMESPACE}})
    )
    log = (workdir / f"{name}.log").open("wb")
    argv = [sys.executable, "manage.py", "simcluster", "--settings", "controlplane.settings.dev"]
    argv += ["--port", str(api_port), "--grpc-port", str(grpc_port), "--control-port", str(control_port)]
    argv += ["--kubeconfig", str(kubeconfig), "--scenario", str(scenario), "--seed", "27"]
    argv += ["--clock-speed", str(args.clock_speed)]
    sim_env = {**env, "LOG_LEVEL": "ERROR", "SIM_CLUSTERD_EVENTS": "0" if args.strict else "1"}
    if args.strict:
        sim_env["SIM_CLUSTERD_FAULT_IDS"] = "1" if fault_ids else "0"
    proc = _common.spawn(argv, cwd=REPO, env=sim_env, stdout=log, stderr=log)
    sim = Sim(name, kubeconfig, proc, grpc_port, control_url=f"http://127.0.0.1:{control_port}")
    deadline = time.monotonic() + 600
    while b"simulated cluster running" not in (workdir / f"{name}.log").read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"simulated cluster {name} did not start: see {workdir / f'{name}.log'}")
        time.sleep(0.2)
    wait_port(control_port, 10)
    return sim


def bare_watch(sim: Sim, stop: threading.Event, ready: threading.Event) -> None:
    """The baseline: the cluster's Events straight from the API server, the moment each line arrives."""
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    core = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=str(sim.kubeconfig)))
    listed: Any = core.list_namespaced_event(NAMESPACE, limit=1)
    version = listed.metadata.resource_version
    ready.set()
    while not stop.is_set():
        response: Any = core.list_namespaced_event(
            NAMESPACE,
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=5,
            _preload_content=False,
        )
        for line in response:
            now = time.time()
            event = json.loads(line)
            obj = event.get("object") or {}
            version = (obj.get("metadata") or {}).get("resourceVersion") or version
            message = str(obj.get("message") or "")
            if obj.get("reason") == "FaultDetected" and message.endswith("]"):
                sim.seen.setdefault(message.rsplit("[", 1)[1][:-1], now)
            if stop.is_set():
                break
        response.release_conn()


def bare_fault_stream(sim: Sim, stop: threading.Event, ready: threading.Event) -> None:
    """The strict baseline: ClusterD's fault stream, the moment each job's first fault signal arrives."""
    from apps.clusterd.client import FaultStream

    stream = FaultStream(f"127.0.0.1:{sim.grpc_port}")

    def close_at_stop() -> None:
        stop.wait()
        stream.close()

    threading.Thread(target=close_at_stop, daemon=True).start()
    ready.set()
    for signal_ in stream:
        now = time.time()
        if signal_.job_id and signal_.signal_type != "normal" and signal_.nodes:
            sim.signalled.setdefault(signal_.job_id, now)
            if sim.by_fault_id:
                for node in signal_.nodes:
                    for device in node.devices:
                        for reason in device.reasons:
                            sim.seen.setdefault(reason, now)


def strict_figures(cluster: Any, sim: Sim, since: Any, jobs: int) -> dict[str, Any]:
    """Per job of the storm: the product's first ``fault.detected`` minus the bare subscriber's signal."""
    from apps.events.models import Incident, JobEvent

    first: dict[str, float] = {}
    detections: dict[str, int] = {}
    rows = JobEvent.objects.filter(job__cluster=cluster, kind="fault.detected", stored_at__gte=since)
    for uid, stored in rows.values_list("job__uid", "stored_at"):
        detections[uid] = detections.get(uid, 0) + 1
        first[uid] = min(first.get(uid, float("inf")), stored.timestamp())
    incidents: dict[str, int] = {}
    for uid in Incident.objects.filter(job__cluster=cluster, opened_at__gte=since).values_list(
        "job__uid", flat=True
    ):
        incidents[uid] = incidents.get(uid, 0) + 1
    added = [first[uid] - at for uid, at in sim.signalled.items() if uid in first]
    lost = [uid for uid in sim.signalled if uid not in first or not incidents.get(uid)]
    duplicated = [uid for uid in sim.signalled if incidents.get(uid, 0) > 1 or detections.get(uid, 0) > 1]
    return {
        "faults": jobs,
        "faults_signalled_by_clusterd": len(sim.signalled),
        "added_s": summary(added),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "in_exactly_one_incident": len(sim.signalled) - len(lost) - len(duplicated),
        "baseline": "bare subscriber to ClusterD's fault.Fault stream (no ClusterD Events)",
    }


def stored_faults(
    cluster: Any, since: Any, held: dict[str, float]
) -> tuple[dict[str, float], dict[str, int]]:
    """fault id → when the product first had it (epoch s), and how many fault.detected events name it.

    A fault that opens an incident is stored as a ``fault.detected`` event (``stored_at``); one that
    joins a recovery in progress is added to that incident's ``fault_ids`` without an event of its
    own, so for it the moment ``IncidentPoller`` first saw it in an incident counts (``held``)."""
    from apps.events.incidents import fault_ids
    from apps.events.models import JobEvent

    first: dict[str, float] = dict(held)
    count: dict[str, int] = {}
    rows = JobEvent.objects.filter(job__cluster=cluster, kind="fault.detected", stored_at__gte=since)
    for data, stored in rows.values_list("data", "stored_at"):
        for ident in fault_ids(data):
            count[ident] = count.get(ident, 0) + 1
            first[ident] = min(first.get(ident, float("inf")), stored.timestamp())
    return first, count


class IncidentPoller(threading.Thread):
    """Notes when each fault id first shows up in one of the cluster's incidents (every 0.25 s, so a
    joined fault's time is late by at most that)."""

    def __init__(self, cluster: Any, since: Any, stop: threading.Event) -> None:
        super().__init__(daemon=True, name=f"incidents-{cluster.name}")
        self.cluster, self.since, self.stop_event = cluster, since, stop
        self.held: dict[str, float] = {}

    def run(self) -> None:
        from django.db import connection

        from apps.events.models import Incident

        checked = self.since
        try:
            while not self.stop_event.wait(0.25):
                now = time.time()
                recent = Incident.objects.filter(job__cluster=self.cluster, updated_at__gte=checked)
                checked_next = max(self.since, _aware(now - 2))  # overlap: commits land out of order
                for fault in recent.values_list("fault", flat=True):
                    for ident in (fault or {}).get("fault_ids") or []:
                        self.held.setdefault(ident, now)
                checked = checked_next
        finally:
            connection.close()


def _aware(epoch: float) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC)


def incident_counts(cluster: Any, since: Any) -> dict[str, int]:
    """fault id → number of incidents holding it."""
    from apps.events.models import Incident

    counts: dict[str, int] = {}
    for fault in Incident.objects.filter(job__cluster=cluster, opened_at__gte=since).values_list(
        "fault", flat=True
    ):
        for ident in (fault or {}).get("fault_ids") or []:
            counts[ident] = counts.get(ident, 0) + 1
    return counts


def settle(sims: list[tuple[Sim, Any]], since: Any, seconds: float) -> None:
    """Wait until every injected fault was seen by the bare watch and stored (or ``seconds`` pass)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done = True
        for sim, cluster in sims:
            first, _ = stored_faults(cluster, since, sim.poller.held if sim.poller else {})
            if not (set(sim.injected) <= set(sim.seen) and set(sim.injected) <= set(first)):
                done = False
        if done:
            return
        time.sleep(0.5)


def figures(sims: list[tuple[Sim, Any]], since: Any) -> dict[str, Any]:
    added: list[float] = []
    end_to_end: list[float] = []
    bare: list[float] = []
    lost: list[str] = []
    duplicated: list[str] = []
    injected = 0
    for sim, cluster in sims:
        first, stored_count = stored_faults(cluster, since, sim.poller.held if sim.poller else {})
        incidents = incident_counts(cluster, since)
        for ident, at in sim.injected.items():
            injected += 1
            if ident not in first or incidents.get(ident, 0) == 0:
                lost.append(ident)
                continue
            if incidents[ident] > 1 or stored_count.get(ident, 0) > 1:
                duplicated.append(ident)
            end_to_end.append(first[ident] - at)
            if ident in sim.seen:
                added.append(first[ident] - sim.seen[ident])
                bare.append(sim.seen[ident] - at)
    return {
        "faults": injected,
        "added_s": summary(added),
        "bare_watch_after_injection_s": summary(bare),
        "stored_after_injection_s": summary(end_to_end),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "lost_ids": lost[:10],
        "duplicated_ids": duplicated[:10],
        "in_exactly_one_incident": injected - len(lost) - len(duplicated),
    }


@dataclass
class Ingester:
    """One ``manage.py ingest`` process and its metrics port."""

    proc: Any
    metrics_port: int

    def cost(self) -> dict[str, float]:
        """What it has spent so far: CPU seconds, and from its /metrics the applier's items, SQL
        statements and wall seconds storing them."""
        from prometheus_client.parser import text_string_to_metric_families

        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        wanted = {
            "controlplane_ingest_items_total": "items",
            "controlplane_ingest_queries_total": "queries",
            "controlplane_ingest_apply_seconds_sum": "apply_s",
            "controlplane_ingest_apply_seconds_count": "transactions",
        }
        found = {"cpu_s": _cpu_seconds(self.proc.pid)}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in wanted:
                    found[wanted[sample.name]] = found.get(wanted[sample.name], 0.0) + sample.value
        return found

    def leases(self) -> set[str]:
        """The clusters whose ingest lease it holds, from its /metrics (``controlplane_leases_held``)."""
        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        return {
            sample.labels["cluster"]
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "controlplane_leases_held"
            and sample.labels.get("lease") == "ingest"
            and sample.value
        }


def quiet_cost(ingester: Ingester, seconds: float = 30.0) -> dict[str, float]:
    """``ingester.cost()`` once it has stopped storing: a fault report stored on arrival
    (apps/ingest/express.py) is passed again in order up to the reorder hold later, and that
    pass is part of what the fault costs."""
    last = ingester.cost()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(1.5)
        now = ingester.cost()
        if now.get("items") == last.get("items"):
            return now
        last = now
    return last


def cost_per_fault(before: dict[str, float], after: dict[str, float], faults: int) -> dict[str, Any]:
    """The ingester's spending between two ``Ingester.cost()`` readings, per fault."""
    if not faults:
        return {}
    spent = {key: after.get(key, 0.0) - before.get(key, 0.0) for key in after}
    return {
        "items": round(spent.get("items", 0.0) / faults, 2),
        "transactions": round(spent.get("transactions", 0.0) / faults, 2),
        "queries": round(spent.get("queries", 0.0) / faults, 1),
        "apply_wall_ms": round(spent.get("apply_s", 0.0) / faults * 1000, 1),
        "cpu_ms": round(spent.get("cpu_s", 0.0) / faults * 1000, 1),
        "queries_per_item": round(spent.get("queries", 0.0) / max(1.0, spent.get("items", 0.0)), 1),
        "apply_wall_ms_per_item": round(
            spent.get("apply_s", 0.0) / max(1.0, spent.get("items", 0.0)) * 1000, 2
        ),
    }


def start_ingester(cluster: Any, env: dict[str, str], workdir: Path, name: str = "") -> Ingester:
    """``manage.py ingest`` for ``cluster`` alone, or (``cluster`` None) competing for every cluster's
    lease with the other ingesters, as the deployed replicas do."""
    log = (workdir / f"ingest-{name or cluster.name}.log").open("wb")
    argv = [sys.executable, "manage.py", "ingest", *(["--cluster", cluster.name] if cluster else [])]
    port = free_port()
    env = {**env, "METRICS_PORT": str(port), "METRICS_ADDR": "127.0.0.1"}
    return Ingester(_common.spawn(argv, cwd=REPO, env=env, stdout=log, stderr=log), port)


def wait_adopted(cluster: Any, jobs: int, seconds: float = 300) -> None:
    from apps.jobs.models import TrainingJob

    deadline = time.monotonic() + seconds
    while TrainingJob.objects.filter(cluster=cluster).count() < jobs:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the ingester adopted fewer than {jobs} jobs of {cluster.name}")
        time.sleep(0.5)


def register(sim: Sim) -> Any:
    from apps.jobs.models import Cluster

    return Cluster.objects.create(
        name=sim.name,
        kubeconfig_path=str(sim.kubeconfig),
        clusterd_address=f"127.0.0.1:{sim.grpc_port}",
        namespaces=[NAMESPACE],
    )


def job_name(index: int) -> str:
    return f"fleet-{index:04d}"


def storm(args: argparse.Namespace, env: dict[str, str], workdir: Path) -> dict[str, Any]:
    from django.utils import timezone

    sim = start_sim(f"storm-{uuid.uuid4().hex[:4]}", args, env, workdir)
    cluster = register(sim)
    ingester = start_ingester(cluster, env, workdir)
    wait_adopted(cluster, args.jobs)
    stop, ready = threading.Event(), threading.Event()
    baseline = bare_fault_stream if args.strict else bare_watch
    threading.Thread(target=baseline, args=(sim, stop, ready), daemon=True).start()
    ready.wait(30)
    time.sleep(2)  # the ingester's watches are past their initial lists
    since = timezone.now()
    sim.poller = IncidentPoller(cluster, since, stop)
    sim.poller.start()
    faults = [
        {"at_s": 0, "job": f"{NAMESPACE}/{job_name(i)}", "rank": 1, "type": "uce" if i % 2 else "hccl"}
        for i in range(args.jobs)
    ]
    for item in faults:
        item["recovers"] = True
    cpu = _cpu_seconds(sim.proc.pid)
    spent = ingester.cost()
    at = time.time()
    run = sim.post("/scenarios", json.dumps({"faults": faults}).encode(), "application/yaml")
    if args.strict:
        return strict_storm(args, sim, cluster, ingester, since, stop, spent, cpu, run)
    # The scenario injects in one thread; the ids come back in the Events (FaultDetected [...]).
    deadline = time.monotonic() + 60
    while len(sim.seen) < len(faults) and time.monotonic() < deadline:
        time.sleep(0.2)
    for ident in sim.seen:
        sim.injected[ident] = at
    settle([(sim, cluster)], since, args.settle)
    stop.set()
    spent_after = quiet_cost(ingester)
    result = figures([(sim, cluster)], since)
    result["ingester_per_fault"] = cost_per_fault(spent, spent_after, len(sim.injected))
    result["scenario"] = run.get("id")
    result["faults_injected"] = len(faults)
    result["faults_shown_by_cluster"] = len(sim.seen)
    result["sim_cpu_s"] = round(_cpu_seconds(sim.proc.pid) - cpu, 2)
    result["goal_added_p99_s"] = GOAL_STORM_P99_S
    return result


def strict_storm(
    args: argparse.Namespace,
    sim: Sim,
    cluster: Any,
    ingester: Ingester,
    since: Any,
    stop: threading.Event,
    spent: dict[str, float],
    cpu: float,
    run: Any,
) -> dict[str, Any]:
    """The storm against ClusterD's fault stream: wait for every job's signal and first detection."""
    from apps.events.models import JobEvent

    deadline = time.monotonic() + args.settle
    while time.monotonic() < deadline:
        stored = (
            JobEvent.objects.filter(job__cluster=cluster, kind="fault.detected", stored_at__gte=since)
            .values("job")
            .distinct()
            .count()
        )
        if len(sim.signalled) >= args.jobs and stored >= args.jobs:
            break
        time.sleep(0.5)
    time.sleep(2)  # a duplicate would come now
    stop.set()
    spent_after = quiet_cost(ingester)
    result = strict_figures(cluster, sim, since, args.jobs)
    result["ingester_per_fault"] = cost_per_fault(spent, spent_after, max(1, len(sim.signalled)))
    result["scenario"] = run.get("id")
    result["sim_cpu_s"] = round(_cpu_seconds(sim.proc.pid) - cpu, 2)
    result["goal_added_p99_s"] = GOAL_STORM_P99_S
    return result


def wait_shared(ingesters: list[Ingester], clusters: list[str], seconds: float = 120) -> dict[str, Ingester]:
    """Wait until every cluster's ingest lease has exactly one holder and no ingester holds two (the fair
    share of two clusters among two processes); cluster name → its holder."""
    deadline = time.monotonic() + seconds
    while True:
        held = [(ingester, ingester.leases()) for ingester in ingesters]
        holders = {name: [i for i, names in held if name in names] for name in clusters}
        if all(len(found) == 1 for found in holders.values()) and all(len(names) <= 1 for _, names in held):
            return {name: found[0] for name, found in holders.items()}
        if time.monotonic() > deadline:
            raise RuntimeError(f"ingest leases not shared out in {seconds:.0f}s: {holders}")
        time.sleep(0.2)


@dataclass
class Kill:
    """``kill -9`` of the ingester holding one cluster, mid-run, and its survivor's takeover."""

    cluster: str
    victim: Ingester
    survivor: Ingester
    at: float = 0.0  # epoch s of the kill
    takeover_s: float | None = None  # until the survivor held the orphaned cluster's lease
    victim_cost: dict[str, float] = field(default_factory=dict)  # read just before the kill

    def run(self, after: float, stop: threading.Event) -> None:
        if stop.wait(after):
            return
        self.victim_cost = self.victim.cost()
        self.at = time.time()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.victim.proc.pid, signal.SIGKILL)
        while not stop.is_set() and time.time() - self.at < 120:
            if self.cluster in self.survivor.leases():
                self.takeover_s = round(time.time() - self.at, 2)
                return
            time.sleep(0.1)


def after_kill(sim: Sim, cluster: Any, since: Any, kill: Kill, window: float) -> dict[str, Any]:
    """The orphaned cluster's faults the bare watch saw in ``window`` s after the kill: each one's
    added latency (the product's first record of it minus the bare watch's), and how many are missing."""
    first, _ = stored_faults(cluster, since, sim.poller.held if sim.poller else {})
    due = [ident for ident, seen in sim.seen.items() if kill.at <= seen < kill.at + window]
    added = [first[ident] - sim.seen[ident] for ident in due if ident in first]
    return {"faults": len(due), "missing": len(due) - len(added), "added_s": summary(added)}


def outside_kill_window(
    pairs: list[tuple[Sim, Any]], since: Any, kill: Kill, window: float
) -> dict[str, Any]:
    """Added latency of every fault but the orphaned cluster's in ``window`` s after the kill: the
    steady state, reported beside the whole run's figure (which includes the take-over)."""
    added: list[float] = []
    for sim, cluster in pairs:
        first, _ = stored_faults(cluster, since, sim.poller.held if sim.poller else {})
        for ident, seen in sim.seen.items():
            in_window = sim.name == kill.cluster and kill.at <= seen < kill.at + window
            if ident in first and ident in sim.injected and not in_window:
                added.append(first[ident] - seen)
    return summary(added)


def sustained(args: argparse.Namespace, env: dict[str, str], workdir: Path) -> dict[str, Any]:
    """Two clusters, two ingesters competing for both leases (fair share: one each), ``--rate`` faults/s
    for ``--minutes``; with ``--kill-at S``, the holder of the first cluster is killed S s in."""
    from django.db import connection
    from django.utils import timezone

    from apps.jobs.models import Cluster

    # Only this mode's two clusters: the unpinned ingesters compete for every registered cluster,
    # and the storm's (``--mode both``; its simulator already stopped) would leave one of them
    # holding two leases. Its figures are taken; its rows go, with everything that refers to them.
    if Cluster.objects.exists():
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {Cluster._meta.db_table} CASCADE")
    tag = uuid.uuid4().hex[:4]
    # Strict: the fault ids stay in ClusterD's signals, the bare subscriber's only way to tell which
    # injected fault a signal reports when a job faults again and again (module docstring).
    sims = [start_sim(f"sus-{tag}-{side}", args, env, workdir, fault_ids=True) for side in ("a", "b")]
    for sim in sims:
        sim.by_fault_id = args.strict
    pairs = [(sim, register(sim)) for sim in sims]
    ingesters = [start_ingester(None, env, workdir, name=f"sus-{tag}-{n}") for n in range(2)]
    for _, cluster in pairs:
        wait_adopted(cluster, args.jobs)
    holders = wait_shared(ingesters, [sim.name for sim in sims])
    stop = threading.Event()
    for sim in sims:
        ready = threading.Event()
        baseline = bare_fault_stream if args.strict else bare_watch
        threading.Thread(target=baseline, args=(sim, stop, ready), daemon=True).start()
        ready.wait(30)
    time.sleep(2)
    since = timezone.now()
    for sim, cluster in pairs:
        sim.poller = IncidentPoller(cluster, since, stop)
        sim.poller.start()
    cpu = {sim.name: _cpu_seconds(sim.proc.pid) for sim in sims}
    spent = [ingester.cost() for ingester in ingesters]
    seconds = args.minutes * 60
    per_sim_rate = args.rate / len(sims)
    errors: list[str] = []

    def pace(sim: Sim, offset: int, lane: int) -> None:
        """Fault n of this cluster is due ``n / rate`` s after the start; ``INJECT_LANES`` threads
        share the schedule, so one slow answer of the fault endpoint does not hold the pace back."""
        begin = time.monotonic()
        n = lane
        while not stop.is_set():
            due = begin + n / per_sim_rate
            if due - begin >= seconds:
                return
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            body = {
                "namespace": NAMESPACE,
                "job": job_name((n + offset) % args.jobs),
                "rank": 1 + n % 3,
                "type": "uce" if n % 2 else "hccl",
                "recovers": True,
            }
            try:
                answer = sim.post("/faults", json.dumps(body).encode(), "application/json")
                sim.injected[answer["id"]] = time.time()
            except Exception as exc:  # counted: a refused injection is the simulator not keeping up
                errors.append(f"{sim.name}: {exc}")
            n += INJECT_LANES

    kill: Kill | None = None
    victim = holders[sims[0].name]
    if args.kill_at:
        survivor = next(ingester for ingester in ingesters if ingester is not victim)
        kill = Kill(sims[0].name, victim, survivor)
    started = time.monotonic()
    threads = [
        threading.Thread(target=pace, args=(sim, i * 7, lane), daemon=True)
        for i, sim in enumerate(sims)
        for lane in range(INJECT_LANES)
    ]
    if kill is not None:
        threads.append(threading.Thread(target=kill.run, args=(args.kill_at, stop), daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    settle(pairs, since, args.settle)
    stop.set()
    spent_after = [
        kill.victim_cost if kill is not None and ingester is kill.victim else ingester.cost()
        for ingester in ingesters
    ]
    result = figures(pairs, since)
    total = sum(len(sim.injected) for sim in sims)
    together = {key: sum(cost.get(key, 0.0) for cost in spent_after) for key in spent[0]}
    before = {key: sum(cost.get(key, 0.0) for cost in spent) for key in spent[0]}
    # With a kill, the victim's spending is known only up to the kill: the figure is then a lower bound.
    result["ingester_per_fault"] = cost_per_fault(before, together, total)
    sim_cpu = sum(_cpu_seconds(sim.proc.pid) - cpu[sim.name] for sim in sims)
    result.update(
        {
            "clusters": len(sims),
            "ingesters": len(ingesters),
            "seconds": round(elapsed, 1),
            "rate_asked": args.rate,
            "rate_injected": round(total / elapsed, 1) if elapsed else 0.0,
            "injection_errors": len(errors),
            "injection_error_sample": errors[:3],
            "sim_cpu_ms_per_fault": round(sim_cpu / total * 1000, 2) if total else None,
            "goal_lag_p99_s": GOAL_SUSTAINED_P99_S,
            "baseline": "bare subscriber to ClusterD's fault.Fault stream (no ClusterD Events)"
            if args.strict
            else "bare watch of the cluster's FaultDetected Events",
        }
    )
    if kill is not None:
        result["kill"] = {
            "cluster": kill.cluster,
            "at_s": args.kill_at,
            "takeover_s": kill.takeover_s,
            "goal_takeover_s": GOAL_TAKEOVER_S,
            f"next_{KILL_WINDOW_S:.0f}s": after_kill(sims[0], pairs[0][1], since, kill, KILL_WINDOW_S)
            if kill.at
            else None,
            f"added_s_outside_the_{KILL_WINDOW_S:.0f}s_after_it": outside_kill_window(
                pairs, since, kill, KILL_WINDOW_S
            )
            if kill.at
            else None,
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("storm", "sustained", "both"), default="both")
    parser.add_argument("--jobs", type=int, default=200, help="running jobs per cluster")
    parser.add_argument("--nodes", type=int, default=1000, help="nodes of 8 NPUs per cluster")
    parser.add_argument("--minutes", type=float, default=10.0, help="sustained mode's length")
    parser.add_argument("--rate", type=float, default=50.0, help="sustained faults/s, over both clusters")
    parser.add_argument("--clock-speed", type=float, default=1.0, help="the simulators' clock")
    parser.add_argument(
        "--kill-at",
        type=float,
        default=0.0,
        help="sustained mode: kill -9 the ingester holding the first cluster this many s in (0: no kill)",
    )
    parser.add_argument(
        "--settle", type=float, default=120.0, help="seconds after the last fault for everything to be stored"
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="ClusterD writes no Events (as the real one); timed against its fault stream",
    )
    args = parser.parse_args()
    database_url = fresh_database("bench_storm")
    _, redis_url = start_redis()
    env = product_env(database_url, REDIS_URL=redis_url, EVENTS_WATCH_TIMEOUT_SECONDS="30")
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    workdir = REPO / "var" / "bench" / f"storm-{uuid.uuid4().hex[:6]}"
    workdir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {
        "bench": "storm",
        "strict": args.strict,
        "jobs": args.jobs,
        "nodes": args.nodes,
        "load_before": _uptime(),
    }
    try:
        if args.mode in ("storm", "both"):
            out["storm"] = storm(args, env, workdir)
            out["load_after_storm"] = _uptime()
        if args.mode in ("sustained", "both"):
            if args.mode == "both":
                # Keep Redis; stop the storm's ingester, then its cluster (newest first).
                for proc in reversed(list(_common._CHILDREN)[1:]):
                    _common.stop(proc)
            out["sustained"] = sustained(args, env, workdir)
            out["load_after_sustained"] = _uptime()
    finally:
        _common.stop_all()
    emit(out)


if __name__ == "__main__":
    main()

"""``SimCluster``: the whole simulated MindCluster cluster in one process, in threads.

::

    sim = SimCluster(clock_speed=500)
    sim.start()                       # API emulator + operator + ClusterD (+ gRPC) + TaskD managers
    sim.kubeconfig_path, sim.api_url, sim.grpc_address
    fault_id = sim.inject_fault("default", "llama", rank=1, fault_type="uce")
    sim.wait_idle(30)
    sim.stop()
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import tempfile
import threading
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from simcluster.clock import SimClock
from simcluster.clusterd.controller import ClusterD
from simcluster.clusterd.grpc_server import ClusterDGrpcServer
from simcluster.fleet import FleetSpec
from simcluster.injector import FAULT_KINDS, FaultSpec, UnknownJobError, parse_fault
from simcluster.kubeapi import KubeApiEmulator
from simcluster.operator import NodePool, SimOperator, pod_slots
from simcluster.scenarios import Scenario, ScenarioRun, run_scenario
from simcluster.taskd import TaskdManagers

log = logging.getLogger(__name__)
DEMO_FAULT_RATE_PER_MIN = 0.5


class SimCluster:
    """Starts and stops every simulated component; the public entry point for tests and commands."""

    def __init__(
        self,
        clock_speed: float = 1.0,
        api_port: int = 0,
        grpc_port: int = 0,
        random_fault_rate_per_min: float = 0.0,
        demo: bool = False,
        *,
        host: str = "127.0.0.1",
        kubeconfig_path: str | Path | None = None,
        control_port: int | None = None,
        seed: int | None = None,
        spare_resources: bool = True,
        admission_config: str | Path | None = None,
        nodes: int | None = None,
        npus_per_node: int = 8,
        clusterd_events: bool | None = None,
        clusterd_fault_ids: bool | None = None,
    ) -> None:
        if random_fault_rate_per_min < 0:
            raise ValueError("random_fault_rate_per_min must be >= 0")
        self.clock = SimClock(clock_speed)
        self.host = host
        self.api_port = api_port
        self.grpc_port = grpc_port
        self.demo = demo
        self.random_fault_rate_per_min = random_fault_rate_per_min or (
            DEMO_FAULT_RATE_PER_MIN if demo else 0.0
        )
        self.control_port = control_port
        # A fixed fleet of ``nodes`` nodes (None: a new node for every pod start, as before).
        self.nodes = NodePool(nodes, npus_per_node)
        self.seed = seed
        self.spare_resources = spare_resources
        # Whether the simulated ClusterD writes Kubernetes Events (a real one writes none: see
        # ClusterD.writes_events); None: SIM_CLUSTERD_EVENTS, "0" for none, default on.
        if clusterd_events is None:
            clusterd_events = os.environ.get("SIM_CLUSTERD_EVENTS", "1") != "0"
        self.clusterd_events = clusterd_events
        # Whether ClusterD's fault signals name each fault in ``faultReason`` (a real one does not:
        # ClusterD.names_faults); None: SIM_CLUSTERD_FAULT_IDS ("0" or "1"), else as the Events.
        if clusterd_fault_ids is None and os.environ.get("SIM_CLUSTERD_FAULT_IDS", "") in ("0", "1"):
            clusterd_fault_ids = os.environ["SIM_CLUSTERD_FAULT_IDS"] == "1"
        self.clusterd_fault_ids = clusterd_events if clusterd_fault_ids is None else clusterd_fault_ids
        # The API server's AdmissionConfiguration (the client certificate it shows webhooks).
        self.admission_config = str(admission_config) if admission_config else None
        self._kubeconfig_arg = Path(kubeconfig_path) if kubeconfig_path else None
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._run_ids = itertools.count(1)
        self.scenario_runs: dict[str, ScenarioRun] = {}
        self.emulator: KubeApiEmulator | None = None
        self.operator: SimOperator | None = None
        self.taskd: TaskdManagers | None = None
        self.clusterd: ClusterD | None = None
        self.grpc: ClusterDGrpcServer | None = None
        self.control: Any = None
        self.kubeconfig_path = ""
        self.api_url = ""
        self.grpc_address = ""
        self.control_url = ""

    # --- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> SimCluster:
        """Start everything; returns self so ``SimCluster(...).start()`` reads naturally."""
        self.emulator = KubeApiEmulator(
            host=self.host, port=self.api_port, admission_config=self.admission_config
        )
        self.emulator.start()
        self.api_url = self.emulator.url
        if self._kubeconfig_arg is None:
            self._tmpdir = tempfile.TemporaryDirectory(prefix="simcluster-")
            path = Path(self._tmpdir.name) / "kubeconfig"
        else:
            path = self._kubeconfig_arg
            path.parent.mkdir(parents=True, exist_ok=True)
        self.emulator.write_kubeconfig(path)
        self.kubeconfig_path = str(path)
        self.operator = SimOperator(self.kubeconfig_path, self.nodes, clusterd_ip=self.host)
        self.operator.start()
        self.taskd = TaskdManagers(self.kubeconfig_path)
        self.clusterd = ClusterD(
            self.kubeconfig_path,
            self.clock,
            self.operator,
            self.taskd,
            seed=self.seed,
            spare_resources=self.spare_resources,
            writes_events=self.clusterd_events,
            names_faults=self.clusterd_fault_ids,
        )
        self.clusterd.start()
        self.grpc = ClusterDGrpcServer(self.clusterd, host=self.host, port=self.grpc_port)
        self.grpc.start()
        self.grpc_address = self.grpc.address
        if self.control_port is not None:
            from simcluster.control import ControlServer  # aiohttp app only when asked for

            self.control = ControlServer(self, host=self.host, port=self.control_port)
            self.control.start()
            self.control_url = self.control.url
        if self.random_fault_rate_per_min > 0:
            self._spawn(self._random_faults, "simcluster-random-faults")
        return self

    def stop(self) -> None:
        """Stop every component; safe to call twice."""
        self._stop.set()
        for component in (self.clusterd, self.operator):  # their watches wind down in parallel
            if component is not None:
                component.request_stop()
        components: tuple[Any, ...] = (self.control, self.grpc, self.clusterd, self.operator)
        for component in components:  # each has stop()
            if component is not None:
                try:
                    component.stop()
                except Exception:
                    log.exception("stopping %s failed", type(component).__name__)
        if self.taskd is not None:
            self.taskd.close()
        for thread in self._threads:
            thread.join(timeout=5)
        if self.emulator is not None:
            self.emulator.stop()
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
        self.control = self.grpc = self.clusterd = self.operator = self.taskd = self.emulator = None

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, target: Any, name: str, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    # --- faults -------------------------------------------------------------------------------------
    def inject_fault(
        self,
        namespace: str,
        job: str,
        rank: int = 0,
        fault_type: str = "normal",
        code: str | None = None,
        level: str | None = None,
        recovers: bool | list[bool] | None = None,
    ) -> str:
        """Inject one fault; returns its id. ``FaultSpecError`` for bad input, ``UnknownJobError`` for
        an unknown job or rank. ``recovers`` None means random (seeded by ``seed``)."""
        return self.inject_spec(
            {
                "namespace": namespace,
                "job": job,
                "rank": rank,
                "type": fault_type,
                "code": code,
                "level": level,
                "recovers": recovers,
            }
        )

    def inject_spec(self, data: Any) -> str:
        """Inject a fault from untrusted JSON (the control endpoint's body)."""
        spec = parse_fault(data)
        return self._clusterd().inject(spec)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until no recovery is queued or in progress."""
        return self._clusterd().wait_idle(timeout)

    def _clusterd(self) -> ClusterD:
        if self.clusterd is None:
            raise RuntimeError("SimCluster is not started")
        return self.clusterd

    # --- fleets -------------------------------------------------------------------------------------
    def create_fleet(self, spec: FleetSpec, timeout: float = 600.0) -> list[str]:
        """Create ``spec``'s jobs through the API and wait until each runs with its Init done (the
        node pool becomes a fixed fleet of ``spec.nodes``); returns the job names. ``TimeoutError``
        when they are not all running by then (wall seconds: setting up is real work)."""
        clusterd = self._clusterd()
        self.nodes.provision(spec.nodes, spec.npus_per_node)
        kube = clusterd.kube
        kube.ensure_namespace(spec.namespace)
        names = []
        for manifest in spec.manifests():
            try:
                kube.create_job(manifest)
            except ApiException as exc:
                if exc.status != 409:  # a fleet made before: its jobs are reused
                    raise
            names.append(manifest["metadata"]["name"])
        if not clusterd.wait_running(spec.namespace, names, timeout):
            raise TimeoutError(f"the fleet's {len(names)} jobs were not all running within {timeout:.0f} s")
        return names

    # --- scenarios ----------------------------------------------------------------------------------
    def check_scenario_jobs(self, scenario: Scenario) -> None:
        """Raise ``UnknownJobError`` if a scenario names a job that does not exist (yet)."""
        kube = self._clusterd().kube
        fleet_jobs = (
            {(scenario.fleet.namespace, scenario.fleet.job_name(i)) for i in range(scenario.fleet.jobs)}
            if scenario.fleet is not None
            else set()
        )
        for item in scenario.faults:
            if (item.spec.namespace, item.spec.job) in fleet_jobs:
                continue  # created by the scenario itself
            if kube.get_job(item.spec.namespace, item.spec.job) is None:
                raise UnknownJobError(f"job {item.spec.namespace}/{item.spec.job} not found")

    def run_scenario(self, scenario: Scenario) -> str:
        """Start running ``scenario`` in the background; returns its run id (see ``scenario_runs``)."""
        run = ScenarioRun(id=f"scenario-{next(self._run_ids)}")
        self.scenario_runs[run.id] = run
        clusterd = self._clusterd()
        self._spawn(
            run_scenario, run.id, scenario, self.clock, clusterd.inject, run, self._stop, self.create_fleet
        )
        return run.id

    def _random_faults(self) -> None:
        rng = random.Random(self.seed)
        mean_gap_s = 60.0 / self.random_fault_rate_per_min
        while self.clock.sleep(rng.expovariate(1.0 / mean_gap_s), self._stop):
            clusterd = self.clusterd
            if clusterd is None:
                return
            try:
                jobs = [j for j in clusterd.kube.list_jobs().get("items", []) if _is_running(j)]
                if not jobs:
                    continue
                job = rng.choice(jobs)
                slots = pod_slots(job)
                if not slots:
                    continue
                spec = FaultSpec(
                    namespace=job["metadata"]["namespace"],
                    job=job["metadata"]["name"],
                    rank=rng.randrange(len(slots)),
                    kind=rng.choice(FAULT_KINDS),
                    recovers=rng.random() < 0.75,
                )
                clusterd.inject(spec)
            except Exception as exc:  # random faults are decoration: never let them kill the cluster
                log.debug("random fault skipped: %s", exc)


def _is_running(job: dict[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return (
        bool(conditions)
        and conditions[-1].get("type") == "Running"
        and conditions[-1].get("status") == "True"
    )

"""``python manage.py simcluster``: the whole simulated MindCluster cluster in this process."""

from __future__ import annotations

import signal
import socket
import threading
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from simcluster.endpoints import DEFAULT_KUBECONFIG
from simcluster.fleet import FleetSpec
from simcluster.runtime import SimCluster
from simcluster.scenarios import Scenario, ScenarioError, parse_scenario


def _check_ports(host: str, ports: dict[str, int]) -> None:
    """Report a clash before anything starts: two flags on one port, or a port already in use."""
    seen: dict[int, str] = {}
    for flag, port in ports.items():
        if port and port in seen:
            raise CommandError(f"{flag} {port} is the same port as {seen[port]}; pick another", returncode=2)
        if port:
            seen[port] = flag
    for flag, port in ports.items():
        if not port:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host if host not in ("", "0.0.0.0") else "0.0.0.0", port))
            except OSError as exc:
                raise CommandError(
                    f"{flag} {port} is not free on {host}: {exc.strerror}", returncode=2
                ) from None


class Command(BaseCommand):
    help = (
        "Run the simulated MindCluster cluster (Kubernetes API emulator, Ascend operator, ClusterD with "
        "its gRPC services, TaskD managers) until Ctrl-C; writes a kubeconfig for it."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=6443, help="Kubernetes API port (default 6443)")
        parser.add_argument("--grpc-port", type=int, default=8899, help="ClusterD gRPC port (default 8899)")
        parser.add_argument(
            "--control-port",
            "--fault-port",
            dest="control_port",
            type=int,
            default=0,
            help="fault-injection HTTP port (default: a free port, printed at start)",
        )
        parser.add_argument(
            "--kubeconfig",
            default=str(DEFAULT_KUBECONFIG),
            help=f"where to write the kubeconfig (default ./{DEFAULT_KUBECONFIG})",
        )
        parser.add_argument(
            "--advertise-host",
            default=None,
            help="host name other processes use to reach it, written into the kubeconfig (e.g. a compose "
            "service name when listening on 0.0.0.0); default: --host",
        )
        parser.add_argument(
            "--demo",
            action="store_true",
            help="random demo faults (the jobs are seeded by the product: demo_setup --seed-jobs)",
        )
        parser.add_argument(
            "--clock-speed", type=float, default=1.0, help="simulated seconds per real second (default 1.0)"
        )
        parser.add_argument(
            "--fault-rate-per-min",
            type=float,
            default=0.0,
            help="random faults per simulated minute (default 0; --demo uses 0.5)",
        )
        parser.add_argument(
            "--seed", type=int, default=None, help="random seed for outcomes and random faults"
        )
        parser.add_argument(
            "--fleet",
            action="store_true",
            help="start with a fleet: 1,000 nodes x 8 NPUs and 200 running jobs in namespace 'fleet' "
            "(simcluster/fleet.py); ready when 'simulated cluster running' is printed",
        )
        parser.add_argument(
            "--scenario",
            default=None,
            help="a scenario YAML to run at start (faults, and optionally a 'fleet:' to build first, "
            "which is built before 'simulated cluster running' is printed)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        for name in ("port", "grpc_port"):
            if not 0 <= options[name] <= 65535:
                raise CommandError(f"--{name.replace('_', '-')} must be a port number 0-65535", returncode=2)
        if options["clock_speed"] <= 0:
            raise CommandError("--clock-speed must be > 0", returncode=2)
        if options["fault_rate_per_min"] < 0:
            raise CommandError("--fault-rate-per-min must be >= 0", returncode=2)
        scenario = _load_scenario(options["scenario"], fleet=options["fleet"])
        control_port = options["control_port"]
        if not 0 <= control_port <= 65535:
            raise CommandError("--fault-port must be a port number 0-65535", returncode=2)
        _check_ports(
            options["host"],
            {"--port": options["port"], "--grpc-port": options["grpc_port"], "--fault-port": control_port},
        )
        sim = SimCluster(
            clock_speed=options["clock_speed"],
            api_port=options["port"],
            grpc_port=options["grpc_port"],
            random_fault_rate_per_min=options["fault_rate_per_min"],
            demo=options["demo"],
            host=options["host"],
            kubeconfig_path=options["kubeconfig"],
            control_port=control_port,
            seed=options["seed"],
        )
        stop = threading.Event()
        previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            try:
                sim.start()
            except OSError as exc:
                raise CommandError(f"cannot start the simulated cluster: {exc}") from exc
            if options["advertise_host"]:
                _advertise(Path(sim.kubeconfig_path), options["advertise_host"])
            _record_fault_endpoint(Path(sim.kubeconfig_path), sim.control_url)
            if scenario is not None:
                if scenario.fleet is not None:
                    try:
                        jobs = sim.create_fleet(scenario.fleet)
                    except TimeoutError as exc:
                        raise CommandError(str(exc)) from exc
                    fleet = scenario.fleet
                    self.stdout.write(
                        f"fleet            {fleet.nodes} nodes x {fleet.npus_per_node} NPUs, "
                        f"{len(jobs)} jobs running in namespace {fleet.namespace}"
                    )
                if scenario.faults:
                    sim.run_scenario(Scenario(scenario.faults))
                    self.stdout.write(f"scenario         {len(scenario.faults)} faults scheduled")
            self.stdout.write(f"Kubernetes API   {sim.api_url}")
            # kubectl sends a ServiceAccount's token over TLS only; its kubeconfig names this port.
            if sim.emulator is not None:
                self.stdout.write(f"  TLS (RBAC)     {sim.emulator.secure_url}")
            self.stdout.write(f"kubeconfig       {Path(sim.kubeconfig_path).resolve()}")
            self.stdout.write(f"ClusterD gRPC    {sim.grpc_address}")
            self.stdout.write(f"fault injection  {sim.control_url}/faults")
            if options["demo"]:
                self.stdout.write("demo: random faults enabled (demo_setup --seed-jobs seeds the jobs)")
            self.stdout.write("simulated cluster running; Ctrl-C to stop")
            self.stdout.flush()
            while not stop.wait(0.5):
                pass
            self.stdout.write("stopping simulated cluster")
        finally:
            sim.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _load_scenario(path: str | None, *, fleet: bool) -> Scenario | None:
    """``--scenario FILE`` parsed (a clear error if it is not a valid scenario), ``--fleet`` added."""
    scenario = None
    if path:
        try:
            scenario = parse_scenario(Path(path).read_bytes())
        except OSError as exc:
            raise CommandError(f"--scenario {path}: {exc.strerror}", returncode=2) from None
        except ScenarioError as exc:
            raise CommandError(f"--scenario {path}: {exc}", returncode=2) from None
    if fleet:
        if scenario is not None and scenario.fleet is not None:
            raise CommandError(
                "--fleet and a scenario with its own 'fleet:' cannot be combined", returncode=2
            )
        scenario = Scenario(scenario.faults if scenario else (), FleetSpec())
    return scenario


def _record_fault_endpoint(kubeconfig: Path, url: str) -> None:
    """Write the fault endpoint into the kubeconfig (a cluster extension, ignored by kubectl) so
    ``sim_fault`` finds it whatever port it got."""
    import yaml

    from simcluster.endpoints import FAULT_ENDPOINT_EXTENSION

    if not url:
        return
    config = yaml.safe_load(kubeconfig.read_text())
    for entry in config.get("clusters") or []:
        cluster = entry.setdefault("cluster", {})
        others = [e for e in cluster.get("extensions") or [] if e.get("name") != FAULT_ENDPOINT_EXTENSION]
        cluster["extensions"] = [*others, {"name": FAULT_ENDPOINT_EXTENSION, "extension": {"url": url}}]
    kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))


def _advertise(kubeconfig: Path, host: str) -> None:
    """Point the kubeconfig's server at ``host`` (same port), for clients in other containers."""
    import urllib.parse

    import yaml

    config = yaml.safe_load(kubeconfig.read_text())
    for cluster in config.get("clusters", []):
        url = urllib.parse.urlsplit(cluster["cluster"]["server"])
        cluster["cluster"]["server"] = urllib.parse.urlunsplit(url._replace(netloc=f"{host}:{url.port}"))
    kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))

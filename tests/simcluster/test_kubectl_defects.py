"""Issue 17's three small defects: sim_fault names the rank range, the fault endpoint has its own flag
and a free port (clashes reported before anything starts), ingest registers the default cluster."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from apps.jobs.models import Cluster
from simcluster.management.commands.sim_fault import (
    FAULT_ENDPOINT_EXTENSION,
    control_url_from_kubeconfig,
)
from simcluster.management.commands.simcluster import _check_ports, _record_fault_endpoint
from tests.support.sim import create_job, make_job, run_sim_fault


def test_sim_fault_out_of_range_rank_names_the_range(sim, kube, capsys) -> None:
    create_job(kube, make_job("defect-rank", workers=3))
    code, _, err = run_sim_fault(
        "default/defect-rank", "--rank", "9", "--kubeconfig", sim.kubeconfig_path, capsys=capsys
    )
    assert code == 2
    assert "--rank 9 is out of range: job default/defect-rank has ranks 0-3 (4 pods)" in err
    code, _, err = run_sim_fault("default/ghost", "--kubeconfig", sim.kubeconfig_path, capsys=capsys)
    assert code == 1 and "unknown job default/ghost" in err


def test_port_clash_is_reported_before_start() -> None:
    with pytest.raises(CommandError, match="--fault-port 7001 is the same port as --port"):
        _check_ports("127.0.0.1", {"--port": 7001, "--grpc-port": 0, "--fault-port": 7001})
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(CommandError, match=f"--grpc-port {port} is not free"):
            _check_ports("127.0.0.1", {"--port": 0, "--grpc-port": port, "--fault-port": 0})


def test_fault_endpoint_is_recorded_in_the_kubeconfig(tmp_path: Path) -> None:
    config = tmp_path / "kc"
    config.write_text(
        yaml.safe_dump({"clusters": [{"name": "s", "cluster": {"server": "http://127.0.0.1:6443"}}]})
    )
    assert control_url_from_kubeconfig(str(config)) == "http://127.0.0.1:6444"  # old kubeconfigs
    _record_fault_endpoint(config, "http://127.0.0.1:39999")
    entry = yaml.safe_load(config.read_text())["clusters"][0]["cluster"]["extensions"][0]
    assert entry["name"] == FAULT_ENDPOINT_EXTENSION
    assert control_url_from_kubeconfig(str(config)) == "http://127.0.0.1:39999"


# Committed rows, as for the process it stands for: the command's threads use connections of their
# own (they must see the registered cluster) and it closes the main thread's between cluster
# listings, which a test transaction cannot survive.
@pytest.mark.django_db(transaction=True)
def test_ingest_registers_the_default_cluster(sim) -> None:
    assert not Cluster.objects.exists()
    with override_settings(KUBECONFIG=sim.kubeconfig_path):
        call_command("ingest", "--run-seconds", "0.5")
    assert Cluster.objects.filter(name="default", is_default=True).exists()

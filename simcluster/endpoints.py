"""Where the simulated cluster's command-line tools find it (shared by ``simcluster`` and ``sim_fault``)."""

from __future__ import annotations

from pathlib import Path

DEFAULT_KUBECONFIG = Path("var") / "simcluster.kubeconfig"
# The kubeconfig cluster extension that carries the fault-injection endpoint's address.
FAULT_ENDPOINT_EXTENSION = "simcluster-fault-endpoint"

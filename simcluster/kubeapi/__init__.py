"""Kubernetes API server emulator for dev/CI (no real cluster needed).

The official ``kubernetes`` Python client talks to it unchanged over real HTTP::

    from simcluster.kubeapi import KubeApiEmulator

    with KubeApiEmulator() as emu:                       # port 0 = pick a free port
        cfg = emu.write_kubeconfig(tmp_path / "kubeconfig")
        api = kubernetes.config.new_client_from_config(config_file=str(cfg))
        emu.faults.conflict_next_writes(2, resource="ascendjobs")
        ...
        emu.faults.writes.count("PATCH", "ascendjobs", "ns", "job-1")  # write accounting
        emu.compact()                                    # old resourceVersions -> 410 Expired
        token = emu.service_account_token("ns", "sa")    # a ServiceAccount's bearer token (RBAC applies)
        emu.write_kubeconfig(tmp_path / "sa", token=token, namespace="ns")

Modules: ``store`` (objects, global resourceVersion, history), ``resources`` (types, discovery),
``authn`` (tokens → users), ``rbac`` / ``rbac_objects`` (authorization, default roles),
``reviews`` (``kubectl auth can-i``), ``selectors``, ``patch``,
``watch`` (streams, bookmarks, bounded queues), ``faults`` (fault injection
and write tallies, also reachable at ``/_sim/faults``), ``server`` (aiohttp app, emulator, ``serve``).
"""

from .authn import ADMIN_TOKEN
from .faults import FaultInjector, WriteTally
from .server import SECURE_SERVER_EXTENSION, KubeApiEmulator, serve, write_token_kubeconfig

__all__ = [
    "ADMIN_TOKEN",
    "SECURE_SERVER_EXTENSION",
    "FaultInjector",
    "KubeApiEmulator",
    "WriteTally",
    "serve",
    "write_token_kubeconfig",
]

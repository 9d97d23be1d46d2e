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

Modules: ``store`` (objects, global resourceVersion, history), ``resources`` (types, discovery),
``selectors``, ``patch``, ``watch`` (streams, bookmarks, bounded queues), ``faults`` (fault injection
and write tallies, also reachable at ``/_sim/faults``), ``server`` (aiohttp app, emulator, ``serve``).
"""

from .faults import FaultInjector, WriteTally
from .server import KubeApiEmulator, serve

__all__ = ["FaultInjector", "KubeApiEmulator", "WriteTally", "serve"]

"""Helpers shared by the test packages: the one place a test imports shared code from.

Submodules by topic (import the one you need):

- ``processes``: ports, ``wait_for``, a private Redis, subprocess environments, a uvicorn server;
- ``world``: the API personas (owner, teammate, outsider, admin) and their small world;
- ``cluster``: live jobs in the Kubernetes API emulator and a real Celery worker (the write path);
- ``sim``: AscendJob manifests and helpers for the simulated MindCluster (``SimCluster``);
- ``kubeapi``: bare objects for the Kubernetes API emulator's own tests;
- ``kube_identity``: a ServiceAccount's token and kubeconfig (TokenRequest API), the admin header;
- ``events``: what the ingester stored (gap-free sequences, incidents) and ``/ws/events/`` clients;
- ``advice``: jobs with hand-computable fault histories;
- ``policies``: a seed-shaped AscendJob for the renderer;
- ``chromium``: the headless Chromium (path, flags) of the browser tests and the page benchmark;
- ``browser``: the live-server test case the browser tests share.

conftest.py files hold only fixtures and hooks; no module imports a conftest or another test module
(``tests/ship/test_test_layout.py`` checks it).
"""

from tests.support.processes import (
    FIXTURES_DIR,
    REPO_ROOT,
    RedisServer,
    connectable,
    free_port,
    free_port_block,
    redis_binary,
    wait_for,
)

__all__ = [
    "FIXTURES_DIR",
    "REPO_ROOT",
    "RedisServer",
    "connectable",
    "free_port",
    "free_port_block",
    "redis_binary",
    "wait_for",
]

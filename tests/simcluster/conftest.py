"""Fixtures for the simulator's tests: one Kubernetes API emulator per session, one namespace per test;
the test process's shared SimCluster at 500x (a module may set its own ``sim_clock_speed``)."""

from __future__ import annotations

import contextlib
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

# Make ``apps`` importable when pytest runs without the project's (concurrently written) config.
_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from kubernetes import client, config  # noqa: E402

from simcluster.kubeapi import FaultInjector, KubeApiEmulator  # noqa: E402


@pytest.fixture(scope="session")
def emulator() -> Iterator[KubeApiEmulator]:
    emu = KubeApiEmulator(host="127.0.0.1", port=0, history_limit=10_000, bookmark_interval=0.2)
    emu.start()
    yield emu
    emu.stop()


@pytest.fixture(scope="session")
def kubeconfig(emulator: KubeApiEmulator, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return emulator.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config", context="simcluster")


@pytest.fixture(scope="session")
def api_client(kubeconfig: Path) -> Iterator[client.ApiClient]:
    # Building the client from the written kubeconfig proves the kubeconfig works.
    api = config.new_client_from_config(config_file=str(kubeconfig), context="simcluster")
    yield api
    api.close()


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


@pytest.fixture
def faults(emulator: KubeApiEmulator) -> Iterator[FaultInjector]:
    """The session emulator's fault injector, disarmed before and after the test."""
    emulator.faults.clear()
    yield emulator.faults
    emulator.faults.clear()


@pytest.fixture
def ns(core: client.CoreV1Api) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    with contextlib.suppress(client.ApiException):
        core.delete_namespace(name)


@pytest.fixture(scope="module")
def sim_clock_speed() -> float:
    """The shared SimCluster (``tests/conftest.py``) at 500x here: a 300 s platform wait takes 0.6 s."""
    return 500

"""Fixtures for the write path: an emulated cluster over HTTP and live jobs in it.

Nothing here is mocked: the official ``kubernetes`` client talks to the API emulator. The broker (a
real redis-server of our own, so a test can restart it) and the real ``celery worker`` processes that
read the test database are the root conftest's ``broker`` and ``worker_factory``
(``tests.support.cluster``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from apps.jobs.models import Cluster, TrainingJob
from simcluster.kubeapi import KubeApiEmulator
from tests.support.cluster import create_live_job, emulator_with_kubeconfig
from tests.support.world import training_job


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeApiEmulator]:
    with emulator_with_kubeconfig(tmp_path_factory.mktemp("kube")) as emu:
        yield emu


@pytest.fixture
def kube(emulator: KubeApiEmulator) -> Iterator[k8s.ApiClient]:
    api = k8s_config.new_client_from_config(config_file=str(emulator.kubeconfig))  # type: ignore[attr-defined]
    emulator.faults.clear()
    yield api
    emulator.faults.clear()
    api.close()


@pytest.fixture
def live_job(kube: k8s.ApiClient, emulator: KubeApiEmulator) -> Callable[..., TrainingJob]:
    def make(*, auto_heal: bool = False, kubeconfig: str | None = None) -> TrainingJob:
        namespace = f"ns-{uuid.uuid4().hex[:8]}"
        name = f"llama-{uuid.uuid4().hex[:6]}"
        manifest = create_live_job(kube, namespace, name)
        cluster, _ = Cluster.objects.get_or_create(
            name=f"sim-{uuid.uuid4().hex[:6]}",
            defaults={"kubeconfig_path": kubeconfig or str(emulator.kubeconfig), "auto_heal": auto_heal},  # type: ignore[attr-defined]
        )
        return training_job(cluster, name, namespace, uid=manifest["metadata"]["uid"])

    return make

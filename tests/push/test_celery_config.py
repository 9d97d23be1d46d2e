"""Celery is configured for at-least-once delivery, with separate queues and bounded tasks."""

from __future__ import annotations

import uuid

import pytest

from apps.jobs.clusters import cluster_check_health
from apps.jobs.models import Cluster
from controlplane.celery import app
from simcluster.kubeapi import KubeApiEmulator
from tests.support import free_port


def test_at_least_once_settings() -> None:
    conf = app.conf
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    assert conf.task_time_limit > conf.task_soft_time_limit
    # Redis re-delivers unacked tasks after the visibility timeout: it must outlast any task.
    assert conf.broker_transport_options["visibility_timeout"] > conf.task_time_limit
    assert conf.task_routes["policies.push_policy"]["queue"] == "push"
    assert conf.task_routes["policies.reconcile_drift"]["queue"] == "slow"
    assert {"sweep-stuck-syncs", "reconcile-drift", "check-clusters"} <= set(conf.beat_schedule)


def test_push_task_is_registered_with_late_ack() -> None:
    app.loader.import_default_modules()  # what a worker does at start: autodiscover tasks modules
    task = app.tasks["policies.push_policy"]
    assert task.acks_late is True
    assert task.reject_on_worker_lost is True


@pytest.mark.django_db
def test_cluster_health_check_records_reachability(emulator: KubeApiEmulator, tmp_path) -> None:
    good = Cluster.objects.create(name=f"up-{uuid.uuid4().hex[:6]}", kubeconfig_path=str(emulator.kubeconfig))  # type: ignore[attr-defined]
    offline = KubeApiEmulator(port=free_port())
    dead_config = offline.write_kubeconfig(tmp_path / "dead")  # never started: nothing listens there
    bad = Cluster.objects.create(name=f"down-{uuid.uuid4().hex[:6]}", kubeconfig_path=str(dead_config))
    missing = Cluster.objects.create(
        name=f"nocfg-{uuid.uuid4().hex[:6]}", kubeconfig_path=str(tmp_path / "none")
    )
    assert cluster_check_health(good) is True
    assert cluster_check_health(bad) is False
    assert cluster_check_health(missing) is False
    bad.refresh_from_db()
    missing.refresh_from_db()
    assert "unreachable" in bad.health_message
    assert "kubeconfig" in missing.health_message

"""``manage.py ingest`` as a subprocess whose database may sit behind a ``TcpProxy``."""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from apps.jobs.models import Cluster
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support import REPO_ROOT as REPO
from tests.support import wait_for
from tests.support.processes import server_env, stop_process, test_database_url
from tests.support.sim import create_job, make_job

INGEST_APP_NAME = "ingest-under-test"

# Every process started here, so none outlives the test process: a test that fails before its own
# cleanup (a start that timed out on a loaded machine) once left an ingester holding its test
# database, and the next run could not recreate that database.
_STARTED: list[subprocess.Popen[bytes]] = []


@atexit.register
def _kill_leftovers() -> None:
    for proc in _STARTED:
        if proc.poll() is None:
            proc.kill()


def cluster_args(clusters: list[str]) -> list[str]:
    return [arg for cluster in clusters for arg in ("--cluster", cluster)]


class ManageProcess:
    """``python manage.py <command> <args>`` on the test database (``db_port``: through a proxy), its
    output in a log file; ``app_name`` names its sessions in ``pg_stat_activity`` (libpq's own
    ``PGAPPNAME``), so a test tells them apart from its own."""

    command = ""

    def __init__(self, args: list[str], *, app_name: str, db_port: int | None = None, **env: str) -> None:
        redis = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/13")
        self.env = server_env(redis, **env)
        self.env["DATABASE_URL"] = test_database_url(db_port)
        self.env["PGAPPNAME"] = app_name
        self.args = args
        self.app_name = app_name
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(f"/tmp/events-{self.command}-{uuid.uuid4().hex[:8]}.log")

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", self.command, *self.args],
            cwd=REPO,
            env=self.env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
        )
        _STARTED.append(self.proc)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no cleanup; its sessions (and the leases on them) end with it."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
            self.proc = None

    def stop(self) -> None:
        stop_process(self.proc, grace=15)
        self.proc = None


class IngestProcess(ManageProcess):
    """``python manage.py ingest --cluster NAME...``; ``app_name``: ``INGEST_APP_NAME`` unless given."""

    command = "ingest"

    def __init__(
        self,
        cluster: str | list[str],
        db_port: int | None = None,
        *,
        app_name: str = INGEST_APP_NAME,
        **env: str,
    ) -> None:
        self.clusters = [cluster] if isinstance(cluster, str) else list(cluster)
        args = cluster_args(self.clusters)
        super().__init__(args, app_name=app_name, db_port=db_port, EVENTS_WATCH_TIMEOUT_SECONDS="5", **env)

    def start(self) -> None:
        super().start()
        try:
            wait_for(lambda: "ingesting" in self.output(), 30, "ingester started")
        except BaseException:
            self.stop()
            raise


def cluster_with_jobs(sim: SimCluster, prefix: str, count: int) -> tuple[Cluster, str, list[str]]:
    """``count`` running jobs (retry, then recover) in a new namespace, and a Cluster row that watches
    only that namespace: (cluster, namespace, job names)."""
    kube = Kube(sim.kubeconfig_path)
    namespace = f"{prefix}-{uuid.uuid4().hex[:6]}"
    names = [f"job{i}" for i in range(count)]
    try:
        kube.ensure_namespace(namespace)
        for name in names:
            create_job(kube, make_job(name, namespace=namespace, strategies="retry,recover"))
    finally:
        kube.close()
    cluster = Cluster.objects.create(
        name=f"{prefix}-{uuid.uuid4().hex[:6]}",
        kubeconfig_path=sim.kubeconfig_path,
        clusterd_address=sim.grpc_address,
        namespaces=[namespace],
    )
    return cluster, namespace, names

"""``manage.py ingest`` as a subprocess whose database may sit behind a ``TcpProxy``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from tests.support import REPO_ROOT as REPO
from tests.support import wait_for
from tests.support.processes import server_env, stop_process, test_database_url

INGEST_APP_NAME = "ingest-under-test"


class IngestProcess:
    def __init__(self, cluster: str, db_port: int | None = None, **env: str) -> None:
        self.cluster = cluster
        redis = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/13")
        self.env = server_env(redis, EVENTS_WATCH_TIMEOUT_SECONDS="5", **env)
        self.env["DATABASE_URL"] = test_database_url(db_port)
        # libpq's own variable: the ingester's sessions are told apart from this test's in pg_stat_activity.
        self.env["PGAPPNAME"] = INGEST_APP_NAME
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(f"/tmp/events-ingest-{uuid.uuid4().hex[:8]}.log")

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "ingest", "--cluster", self.cluster],
            cwd=REPO,
            env=self.env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
        )
        wait_for(lambda: "ingesting" in self.output(), 30, "ingester started")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
            self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None

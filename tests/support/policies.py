"""An AscendJob shaped like the seed documents, for the renderer's tests; the policy commands run
as a CI job would run them."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.core.management import ManagementUtility

REPO_ROOT = Path(__file__).resolve().parents[2]


def manage_without_database(
    command: str, *args: str | Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``manage.py <command> <args>`` in a subprocess whose database cannot be reached and whose
    settings are the base ones: the offline tools must work like that in a CI job."""
    env = {
        **os.environ,
        "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none",
        "DJANGO_SETTINGS_MODULE": "controlplane.settings.base",
    }
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "manage.py"), command, *map(str, args)],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=120,
    )


def manage_in_process(
    command: str, *args: str | Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """What ``manage_without_database`` returns, without a new Python (a Django start-up costs about
    2 s of CPU; issue #22). ``ManagementUtility`` is what manage.py runs: the same argument parsing,
    ``CommandError`` to stderr and its exit code, ``sys.exit`` kept. The database is out of reach all
    the same: pytest-django refuses every connection in a test without the ``db`` fixture, so a
    command that touched the ORM would fail the test. Each command module keeps one test in a real
    subprocess with the base settings (``manage_without_database``)."""
    argv = ["manage.py", command, *map(str, args)]
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _stdin(stdin):
        try:
            ManagementUtility(argv).execute()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _stdin(text: str | None) -> Iterator[None]:
    saved = sys.stdin
    sys.stdin = io.StringIO(text or "")
    try:
        yield
    finally:
        sys.stdin = saved


def seed_job(
    *, framework: str = "pytorch", workers: int = 3, npus: int = 8, name: str = "gpt-pretrain"
) -> dict:
    """A small AscendJob shaped like the seeds: a leader and a Worker, each with container ``ascend``."""
    leader = "Scheduler" if framework == "mindspore" else "Master"

    def replica(role: str, count: int) -> dict[str, Any]:
        return {
            "replicas": count,
            "restartPolicy": "Never",
            "template": {
                "metadata": {"labels": {"ring-controller.atlas": "ascend-910b"}},
                "spec": {
                    "nodeSelector": {"host-arch": "huawei-arm"},
                    "containers": [
                        {
                            "name": "ascend",
                            "image": "mindspeed-llm:2.3.0",
                            "command": ["/bin/bash", "-c"],
                            "args": [
                                "cd /job/code; "
                                "bash scripts/train_start.sh /job/code /job/output pretrain_gpt.py"
                            ],
                            "env": [
                                {"name": "XDL_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}
                            ],
                            "ports": [{"containerPort": 2222, "name": "ascendjob-port"}],
                            "resources": {
                                "requests": {"huawei.com/Ascend910": npus},
                                "limits": {"huawei.com/Ascend910": npus},
                            },
                            "volumeMounts": [{"name": "code", "mountPath": "/job/code"}],
                        }
                    ],
                    "volumes": [{"name": "code", "hostPath": {"path": "/data/code"}}],
                },
            },
        }

    return {
        "apiVersion": "mindxdl.gitee.com/v1",
        "kind": "AscendJob",
        "metadata": {
            "name": name,
            "namespace": "training",
            "labels": {"framework": framework, "ring-controller.atlas": "ascend-910b"},
        },
        "spec": {
            "schedulerName": "volcano",
            "runPolicy": {"schedulingPolicy": {"minAvailable": 1 + workers, "queue": "default"}},
            "successPolicy": "AllWorkers",
            "replicaSpecs": {leader: replica(leader, 1), "Worker": replica("Worker", workers)},
        },
    }

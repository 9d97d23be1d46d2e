"""The browser tests' shared parts: Debian's Chromium driven by Playwright, and the live-server test
case (Daphne serving the project's ASGI app, the Kubernetes API emulator) their classes derive from.

Run them in their own pytest process: ``pytest -m browser tests/browser``.
"""

from __future__ import annotations

import time
import unittest
import uuid
from datetime import timedelta
from typing import Any

from channels.testing import ChannelsLiveServerTestCase
from daphne.testing import DaphneProcess
from django.contrib.auth.models import User
from django.core.management.base import CommandError
from django.db import OperationalError, connection
from django.utils import timezone
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from apps.events import broadcast
from apps.events.models import Incident, JobEvent
from apps.events.services import event_record
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.models import PolicySync
from apps.policies.push import push_sync
from controlplane.celery import app as celery_app
from mindcluster import keys as c
from simcluster.kubeapi import KubeApiEmulator
from tests.support.chromium import CHROMIUM, CHROMIUM_ARGS, chromium_available
from tests.support.cluster import create_operator_podgroup
from tests.support.processes import REPO_ROOT, wait_for

SCREENSHOTS = REPO_ROOT / "test-artifacts" / "screenshots"


PASSWORD = "correct-horse-battery"


def ascendjob(name: str, namespace: str) -> dict[str, Any]:
    container = {
        "name": c.CONTAINER_NAME,
        "image": "mindspeed-llm:2.3.0",
        "ports": [{"containerPort": c.PORT_ASCENDJOB[1], "name": c.PORT_ASCENDJOB[0]}],
        "resources": {"requests": {"huawei.com/Ascend910": 8}, "limits": {"huawei.com/Ascend910": 8}},
    }
    return {
        "apiVersion": c.ASCENDJOB_API_VERSION,
        "kind": c.ASCENDJOB_KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": {c.LABEL_FRAMEWORK: "pytorch"}},
        "spec": {
            "schedulerName": c.VOLCANO_SCHEDULER,
            "runPolicy": {"schedulingPolicy": {"minAvailable": 2, "queue": "default"}},
            "replicaSpecs": {
                role: {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {"spec": {"containers": [container]}},
                }
                for role in ("Master", "Worker")
            },
        },
    }


_INHERITED: list[Any] = []


def forget_inherited_database_connections() -> None:
    """In the forked server: stop using the parent's database connections and pool.

    A fork shares the parent's sockets. Using them from two processes corrupts both sides, and
    closing them in the child closes them for the parent too; so keep them referenced (never
    garbage-collected, never closed) and let the child open its own.
    """
    from django.db import connections
    from django.db.backends.postgresql.base import DatabaseWrapper

    _INHERITED.append(dict(DatabaseWrapper._connection_pools))
    DatabaseWrapper._connection_pools.clear()
    for conn in connections.all(initialized_only=True):
        _INHERITED.append(conn.connection)
        conn.connection = None


class ServerProcess(DaphneProcess):
    """Daphne in a forked child that keeps the parent's database settings but not its connections.

    The fork already points at the test database (channels' default setup would prefix ``test_``
    a second time); it must not share the parent's connections or pool.
    """

    def __init__(
        self,
        host: str,
        get_application: Any,
        kwargs: Any = None,
        setup: Any = None,
        teardown: Any = None,
        port: int | None = None,
    ) -> None:
        super().__init__(
            host,
            get_application,
            kwargs=kwargs,
            setup=forget_inherited_database_connections,
            teardown=teardown,
            port=port,
        )

    def terminate(self) -> None:
        # A child forked while Playwright's loop runs in the parent may inherit a SIGTERM handler
        # that never stops Twisted's reactor: fall back to SIGKILL so join() cannot hang.
        super().terminate()
        self.join(5)
        if self.is_alive():
            self.kill()


def _database_quiet() -> bool:
    """No other session of this database is running a statement or holding a transaction open."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction')"
        )
        row = cursor.fetchone()
    return row is not None and row[0] == 0


def _wait_database_quiet(seconds: float = 15.0) -> None:
    """Up to ``seconds`` for ``_database_quiet``; then the flush goes ahead (and is retried)."""
    deadline = time.monotonic() + seconds
    while not _database_quiet() and time.monotonic() < deadline:
        time.sleep(0.05)


class BrowserTestCase(ChannelsLiveServerTestCase):
    """A live ASGI server (Daphne, forked), the Kubernetes API emulator, and headless Chromium through
    Playwright; a superuser ``ada`` and a default cluster per test, and helpers to seed jobs and events."""

    host = "127.0.0.1"
    ProtocolServerProcess = ServerProcess

    @classmethod
    def setUpClass(cls) -> None:
        if not chromium_available():
            raise unittest.SkipTest(f"needs the playwright package and Chromium at {CHROMIUM}")
        from playwright.sync_api import sync_playwright

        super().setUpClass()
        cls.emulator = KubeApiEmulator(host="127.0.0.1", port=0)
        cls.emulator.start()
        kube_dir = SCREENSHOTS.parent / "kube"
        kube_dir.mkdir(parents=True, exist_ok=True)
        cls.kubeconfig = str(cls.emulator.write_kubeconfig(kube_dir / f"kubeconfig-{uuid.uuid4().hex[:6]}"))
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        cls.playwright = sync_playwright().start()
        cls.browser = cls.playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.browser.close()
        # The server first: a server forked after Playwright started holds the driver's pipe open,
        # and the driver does not exit until every copy of it is closed.
        cls._server_process.terminate()
        cls._server_process.join()
        cls.playwright.stop()
        cls.emulator.stop()
        super().tearDownClass()

    def setUp(self) -> None:
        self.user = User.objects.create_superuser("ada", "ada@example.com", PASSWORD)
        self.cluster = Cluster.objects.create(name="sim", kubeconfig_path=self.kubeconfig, is_default=True)
        # Playwright evaluates wait_for_function predicates with eval, which the product's
        # Content-Security-Policy forbids; test_pages_run_under_the_content_security_policy drives
        # the pages with the policy enforced.
        self.context = self.browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
        self.page = self.context.new_page()
        self.page.set_default_timeout(10_000)
        # A page load waits for the live server, which shares two cores with the rest of the suite: its
        # first request of a class (imports, static files) took over 10 s at load 10. Waits end on the
        # event, so the longer bound only matters when a page really does not come.
        self.page.set_default_navigation_timeout(30_000)
        self.page_errors: list[str] = []
        self.page.on("pageerror", lambda error: self.page_errors.append(str(error)))

    def tearDown(self) -> None:
        self.context.close()
        with celery_app.connection_for_write() as conn:  # pushes the page queued; the test ran them itself
            for queue in ("push", "slow", "default"):
                conn.default_channel.queue_purge(queue)
        self.assertEqual(self.page_errors, [], "JavaScript errors on the page")

    def _fixture_teardown(self) -> None:
        """Empty the tables once the live server is done with them.

        Closing the browser does not stop a request the server is still answering: its transaction
        may take row locks (``SELECT ... FOR UPDATE``) on tables the flush's ``TRUNCATE`` has already
        locked, and PostgreSQL then ends the flush as a deadlock (a fresh-clone run of stop 36, in
        the fleet test's teardown); the next test then found the last one's user. So wait until no
        other session of this database is inside a statement or a transaction, and retry a flush
        that lost a deadlock anyway.
        """
        _wait_database_quiet()
        for attempt in range(3):
            try:
                super()._fixture_teardown()
                return
            except (OperationalError, CommandError) as exc:
                if attempt == 2 or "deadlock" not in str(exc.__cause__ or exc).lower():
                    raise
                connection.close()  # the failed flush left its transaction aborted
                _wait_database_quiet()

    # --- helpers ----------------------------------------------------------------------------------
    def url(self, path: str) -> str:
        return f"{self.live_server_url}{path}"

    def login(self) -> None:
        self.page.goto(self.url("/login/"))
        self.page.fill("#id_username", "ada")
        self.page.fill("#id_password", PASSWORD)
        self.page.click("button[type=submit]")
        self.page.wait_for_url(self.url("/"))

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))

    def live_job(self, name: str = "llama-70b") -> TrainingJob:
        """An AscendJob and its PodGroup in the emulated cluster, registered as a job."""
        namespace = f"ns-{uuid.uuid4().hex[:6]}"
        api = k8s_config.new_client_from_config(config_file=self.kubeconfig)
        try:
            k8s.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
            custom = k8s.CustomObjectsApi(api)
            created = custom.create_namespaced_custom_object(
                c.ASCENDJOB_GROUP,
                c.ASCENDJOB_VERSION,
                namespace,
                c.ASCENDJOB_PLURAL,
                ascendjob(name, namespace),
            )
            meta = created["metadata"]
            create_operator_podgroup(custom, created)
        finally:
            api.close()
        return TrainingJob.objects.create(
            cluster=self.cluster,
            namespace=namespace,
            name=name,
            uid=meta["uid"],
            framework="pytorch",
            replicas={"Master": 1, "Worker": 1},
            npus_per_pod=8,
            mindcluster_version="26.1",
        )

    def podgroup_annotations(self, job: TrainingJob) -> dict[str, str]:
        api = k8s_config.new_client_from_config(config_file=self.kubeconfig)
        try:
            pg = k8s.CustomObjectsApi(api).get_namespaced_custom_object(
                c.PODGROUP_GROUP,
                c.PODGROUP_VERSION,
                job.namespace,
                c.PODGROUP_PLURAL,
                f"{job.name}-{job.uid}",
            )
        finally:
            api.close()
        return dict(pg["metadata"].get("annotations") or {})

    def complete_push(self, job: TrainingJob) -> PolicySync:
        """Run the push the page queued (what the Celery worker would do), once it is queued."""
        sync = wait_for(
            lambda: (
                PolicySync.objects.filter(job=job, state=PolicySync.State.PENDING).order_by("-id").first()
            ),
            10,
            "the page to queue a push",
        )
        result = push_sync(sync_id=sync.pk, token="t")
        assert result is not None and result.state == PolicySync.State.APPLIED, result and result.last_error
        broadcast.flush()
        return result

    def record(self, job: TrainingJob, n: int = 1, **fields: Any) -> list[JobEvent]:
        events = []
        for i in range(n):
            event = event_record(
                job=job,
                kind=fields.get("kind", "job.warning"),
                message=fields.get("message", f"test event {i}"),
                source="test",
                severity=fields.get("severity", "warning"),
                data=fields.get("data", {}),
            )
            assert event is not None
            events.append(event)
        broadcast.flush()
        return events

    def past_incidents(self, job: TrainingJob) -> None:
        """Three closed incidents with their phase durations (for the chart, bars and grid)."""
        now = timezone.now()
        for number, (strategies, outcome, recover_ms) in enumerate(
            [
                (["retry"], "recovered", 4_000),
                (["recover"], "recovered", 41_000),
                (["recover", "dump"], "rescheduled", 95_000),
            ],
            start=1,
        ):
            opened = now - timedelta(minutes=90 - 25 * number)
            Incident.objects.create(
                job=job,
                number=number,
                opened_at=opened,
                detected_at=opened,
                # The first as on a real cluster without platform mode: no decide time (insights.js).
                decided_at=None if number == 1 else opened,
                closed_at=opened + timedelta(milliseconds=recover_ms + 6_000),
                outcome=outcome,
                strategies=strategies,
                attempts=[{"strategy": s, "outcome": "ok"} for s in strategies],
                ranks=[number * 2],
                nodes=[f"node-{number}"],
                detect_ms=3_500,
                decide_ms=None if number == 1 else 2_500,
                recover_ms=recover_ms,
                first_seq=1,
                last_seq=1,
            )

    def shown_seqs(self) -> list[int]:
        return [
            int(s)
            for s in self.page.eval_on_selector_all("#event-list li", "els => els.map(e => e.dataset.seq)")
        ]

    def open_live(self, job: TrainingJob) -> None:
        self.page.goto(self.url(f"/jobs/{job.pk}/#live"))
        self.page.wait_for_selector("body[data-ready=true]")
        self.page.wait_for_selector('#conn-state[data-state="live"]')

    def tab_to(self, selector: str, limit: int = 150) -> None:
        """Press Tab until ``selector`` has the focus (keyboard only), and check the focus is visible."""
        for _ in range(limit):
            self.page.keyboard.press("Tab")
            if self.page.evaluate(
                "s => !!document.activeElement && document.activeElement.matches(s)", selector
            ):
                outline = self.page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
                assert outline not in ("", "none"), f"no visible focus on {selector}"
                return
        raise AssertionError(f"{selector} never received the focus by Tab")

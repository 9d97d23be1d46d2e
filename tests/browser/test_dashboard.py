"""The dashboard in a real browser against a real server (HTTP + websockets), database and cluster API.

- The server is Daphne serving the project's ASGI app (``ChannelsLiveServerTestCase``): REST, pages,
  static files and ``/ws/events/`` exactly as in production.
- The cluster is ``KubeApiEmulator`` reached through a kubeconfig by the official client; pushes are
  completed by calling ``apps.policies.push.push_sync`` from the test once the page has queued one
  (the same function the Celery task runs), so the test controls when "applied" happens.
- Events are recorded with ``apps.events.services.event_record`` (store, then broadcast).
"""

from __future__ import annotations

import re
import time
import uuid
from datetime import timedelta
from functools import partial

from channels.testing.live import make_application
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.utils import timezone

from apps.events.models import Incident, JobEvent
from apps.jobs.models import Cluster, TrainingJob
from mindcluster import keys as c
from tests.support import browser


class DashboardBrowserTests(browser.BrowserTestCase):
    """The dashboard's pages, one scenario per test."""

    def open_live_job(self) -> TrainingJob:
        """A live job, signed in as ada, on its page."""
        job = self.live_job()
        self.login()
        self.page.goto(self.url(f"/jobs/{job.pk}/"))
        return job

    def mindspore_job(self, name: str, mindcluster_version: str) -> TrainingJob:
        """A registered (not live) MindSpore job in ``vision``: the second job some scenarios need."""
        return TrainingJob.objects.create(
            cluster=self.cluster,
            namespace="vision",
            name=name,
            framework="mindspore",
            replicas={"Scheduler": 1, "Worker": 2},
            npus_per_pod=8,
            mindcluster_version=mindcluster_version,
        )

    # --- scenarios --------------------------------------------------------------------------------
    def test_login_required_then_overview_shows_policy_state_and_recovering_badge(self) -> None:
        calm = self.live_job("calm-job")
        busy = self.mindspore_job("busy-job", "7.1")
        Incident.objects.create(job=busy, number=1, opened_at=timezone.now(), first_seq=1, last_seq=1)
        self.page.goto(self.url(f"/jobs/{calm.pk}/"))
        self.page.wait_for_url(re.compile(r"/login/\?next="))
        self.page.fill("#id_username", "ada")
        self.page.fill("#id_password", "wrong")
        self.page.click("button[type=submit]")
        self.page.wait_for_selector("text=did not match")
        self.shot("login")
        self.login()
        self.page.wait_for_selector("body[data-ready=true]")
        rows = self.page.locator("#jobs-table tbody tr")
        self.assertEqual(rows.count(), 2)
        busy_row = self.page.locator(f'tr[data-job="{busy.pk}"]')
        self.assertIn("Recovering", busy_row.inner_text())
        self.assertIn("#1", busy_row.inner_text())
        self.page.select_option("#f-namespace", "vision")
        self.page.wait_for_function("document.querySelectorAll('#jobs-table tbody tr').length === 1")
        self.page.select_option("#f-namespace", "")
        self.page.wait_for_selector('#conn-state[data-state="live"]')
        self.shot("jobs-overview")
        self.page.click("#theme-toggle")  # the choice overrides prefers-color-scheme and is remembered
        self.assertEqual(self.page.get_attribute("html", "data-theme"), "dark")
        self.shot("jobs-overview-dark")
        self.page.click("#theme-toggle")
        # Sign out works and leads back to the login page.
        self.page.click("text=Sign out")
        self.page.wait_for_url(re.compile(r"/login/$"))

    def test_invalid_combination_error_at_field_then_fix_preview_and_apply(self) -> None:
        job = self.live_job()
        mindspore = self.mindspore_job("ms-job", "26.1")
        self.login()
        # elastic-training on a MindSpore job: the error sits under that checkbox.
        self.page.goto(self.url(f"/jobs/{mindspore.pk}/"))
        self.page.check("#strategy-elastic-training")
        issue = self.page.locator(
            '#issues-strategy-elastic-training .issue.error[data-code="elastic_training_requires_pytorch"]'
        )
        issue.wait_for()
        self.assertEqual(self.page.get_attribute("#strategy-elastic-training", "aria-invalid"), "true")
        self.assertIn("error", self.page.inner_text("#validation-summary"))
        self.assertTrue(self.page.is_disabled("#save-apply"))

        # graceExit without dump on the PyTorch job: the error at the sub-health field, with allowed values.
        self.page.goto(self.url(f"/jobs/{job.pk}/"))
        self.page.check("#strategy-recover")
        self.page.select_option("#f-sub_healthy_strategy", "graceExit")
        grace = self.page.locator(
            '#issues-sub_healthy_strategy .issue.error[data-code="grace_exit_requires_dump"]'
        )
        grace.wait_for()
        self.shot("job-policy-error")
        # Fix it: add dump. The error goes, and the preview shows the annotation ClusterD will read.
        self.page.check("#strategy-dump")
        grace.wait_for(state="detached")
        self.page.wait_for_function(
            "document.getElementById('out-patch').textContent.includes('recover-strategy: recover,dump')"
        )
        self.assertIn("When the job is (re)created", self.page.inner_text("#effects"))
        self.page.click("#ptab-launcher")
        self.assertTrue(self.page.is_visible("#out-launcher"))
        self.page.click("#ptab-diff")
        self.page.wait_for_function(
            "document.getElementById('live-state').textContent.includes('resourceVersion')"
        )
        self.page.click("#ptab-patch")
        self.shot("job-policy")

        # Apply: the page queues the push, the push runs, the page shows it "written" (never "applied").
        self.page.click("#save-apply")
        self.complete_push(job)
        self.page.locator("#sync-detail .badge.written").wait_for()
        self.assertEqual(self.page.inner_text("#fact-revision"), "1")
        self.assertEqual(self.podgroup_annotations(job)[c.ANNOTATION_RECOVER_STRATEGY], "recover,dump")
        self.shot("job-policy-applied")

        # History: the revision with its author, and a second one restorable.
        self.page.click("#tab-history")
        self.page.wait_for_selector("#revisions table")
        self.assertIn("ada", self.page.inner_text("#revisions"))
        self.shot("job-history")

    def test_complete_the_form_with_the_keyboard_only(self) -> None:
        job = self.open_live_job()
        self.page.wait_for_selector("body[data-ready=true]")
        self.tab_to("#strategy-recover")
        self.page.keyboard.press("Space")
        self.tab_to("#strategy-dump")
        self.page.keyboard.press("Space")
        self.tab_to("#f-pod_rescheduling")
        self.page.keyboard.press("Space")
        self.tab_to("#f-monitor_interval")
        self.page.keyboard.press("Control+A")
        self.page.keyboard.type("10")
        self.tab_to("#f-sub_healthy_strategy")
        self.page.keyboard.type("g")  # type-ahead picks graceExit, valid now that dump is on
        self.tab_to("#f-comment")
        self.page.keyboard.type("keyboard only")
        self.page.wait_for_function(
            "document.getElementById('validation-summary').textContent.includes('valid')"
        )
        self.assertEqual(self.page.input_value("#f-sub_healthy_strategy"), "graceExit")
        self.tab_to("#save-apply")
        self.page.keyboard.press("Enter")
        self.complete_push(job)
        self.page.locator("#sync-detail .badge.written").wait_for()
        spec = TrainingJob.objects.get(pk=job.pk).current_revision.spec
        self.assertEqual(spec["strategies"], ["recover", "dump"])
        self.assertTrue(spec["pod_rescheduling"])
        self.assertEqual(spec["monitor_interval"], 10)
        self.assertEqual(spec["sub_healthy_strategy"], "graceExit")

    def test_fault_reaches_the_timeline_within_two_seconds(self) -> None:
        job = self.live_job()
        self.record(job, 3)
        self.past_incidents(job)
        self.login()
        self.open_live(job)
        self.assertEqual(self.shown_seqs(), [1, 2, 3])
        self.assertEqual(self.page.locator("#incidents .incident").count(), 3)
        self.assertEqual(self.page.locator("#chart svg circle").count(), 3)
        # A closed incident whose decide time the cluster never reported says so (not a bare dash).
        self.assertIn("decide not reported", self.page.inner_text('#incidents [aria-label="Incident 1"]'))
        self.assertIn("decide 2.5 s", self.page.inner_text('#incidents [aria-label="Incident 2"]'))
        started = time.monotonic()
        self.record(
            job,
            kind="fault.detected",
            severity="error",
            message="UCE on rank 3",
            data={"ranks": [3], "node": "node-7", "code": "80E01801", "fault_type": "uce"},
        )
        self.page.locator('#event-list li[data-seq="4"]').wait_for(timeout=2_000)
        elapsed = time.monotonic() - started
        self.assertLess(elapsed, 2.0)
        self.assertIn("UCE on rank 3", self.page.inner_text('#event-list li[data-seq="4"]'))
        # Filters: by rank and by severity.
        self.page.fill("#ef-rank", "3")
        self.page.wait_for_function(
            "[...document.querySelectorAll('#event-list li')].filter(l => !l.hidden).length === 1"
        )
        self.page.fill("#ef-rank", "")
        self.page.select_option("#ef-severity", "error")
        self.page.wait_for_function(
            "[...document.querySelectorAll('#event-list li')].filter(l => !l.hidden).length === 1"
        )
        self.page.select_option("#ef-severity", "")
        self.shot("job-live")

    def test_fault_injected_in_the_simulated_cluster_reaches_the_timeline(self) -> None:
        """The whole path: simulated ClusterD → Kubernetes objects → ingester → store → socket → page."""
        from apps.ingest.runner import ClusterIngester
        from simcluster.runtime import SimCluster
        from tests.support.sim import create_job, make_job

        sim = SimCluster(clock_speed=200, seed=5).start()
        ingester = None
        try:
            cluster = Cluster.objects.create(name="simulated", kubeconfig_path=sim.kubeconfig_path)
            assert sim.clusterd is not None
            live = create_job(sim.clusterd.kube, make_job("gpt-sim", workers=1))
            job = TrainingJob.objects.create(
                cluster=cluster,
                namespace="default",
                name="gpt-sim",
                uid=live["metadata"]["uid"],
                replicas={"Master": 1, "Worker": 1},
                npus_per_pod=8,
            )
            ingester = ClusterIngester(cluster)
            ingester.start()
            self.login()
            self.open_live(job)
            # The 2 s promise is the live path's: not the warm-up after the ingester took the
            # cluster, when a replayed backlog is merged with a longer hold (EVENTS_INGEST_WARMUP_*);
            # on a loaded machine the warm-up had not ended when the fault came (CI, stop 36).
            deadline = time.monotonic() + 30
            while not ingester.live and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertTrue(ingester.live, "the ingester did not finish its warm-up in 30 s")
            started = time.monotonic()
            sim.inject_fault("default", "gpt-sim", rank=1, fault_type="uce", recovers=True)
            self.page.locator("#event-list li", has_text="80E01801").first.wait_for(timeout=2_000)
            self.assertLess(time.monotonic() - started, 2.0)
        finally:
            if ingester is not None:
                ingester.stop()
            sim.stop()

    def test_server_restart_timeline_resumes_with_no_gap(self) -> None:
        job = self.live_job()
        self.record(job, 3)
        self.login()
        self.open_live(job)
        self.assertEqual(self.shown_seqs(), [1, 2, 3])
        port = self._port
        self._server_process.terminate()
        self._server_process.join()
        self.page.wait_for_selector('#conn-state:not([data-state="live"])')
        self.record(job, 5, message="while the server was down")
        process = browser.ServerProcess(
            self.host, partial(make_application, static_wrapper=ASGIStaticFilesHandler), port=port
        )
        process.start()
        assert process.ready.wait(10), "the restarted server did not come up"
        type(self)._server_process = process
        self.page.wait_for_selector('#conn-state[data-state="live"]', timeout=20_000)
        self.page.wait_for_function("document.querySelectorAll('#event-list li').length >= 8")
        self.record(job, 1, message="after the restart")
        self.page.wait_for_function("document.querySelectorAll('#event-list li').length >= 9", timeout=2_000)
        self.assertEqual(self.shown_seqs(), list(range(1, 10)))

    def test_long_history_opens_with_the_newest_page_and_loads_older_on_scroll(self) -> None:
        job = self.live_job()
        now = timezone.now()
        JobEvent.objects.bulk_create(
            JobEvent(
                job=job,
                seq=i,
                kind="job.warning",
                severity="info",
                message=f"old {i}",
                source="test",
                occurred_at=now - timedelta(seconds=500 - i),
            )
            for i in range(1, 451)
        )
        self.login()
        self.open_live(job)
        seqs = self.shown_seqs()
        self.assertEqual((seqs[0], seqs[-1], len(seqs)), (251, 450, 200))
        self.page.eval_on_selector("#timeline", "el => el.scrollTop = 0")
        self.page.wait_for_function("document.querySelectorAll('#event-list li').length === 400")
        self.assertEqual(self.shown_seqs()[:2], [51, 52])
        self.page.click("#autoscroll")
        self.assertEqual(self.page.get_attribute("#autoscroll", "aria-pressed"), "false")

    def test_pages_run_under_the_content_security_policy(self) -> None:
        """Every page renders its data with the CSP enforced, and the browser reports no violation."""
        job = self.live_job("csp-job")
        context = self.browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(10_000)
        violations: list[str] = []
        errors: list[str] = []
        page.on(
            "console",
            lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None,
        )
        page.on("pageerror", lambda error: errors.append(str(error)))
        try:
            page.goto(self.url("/login/"))
            page.fill("#id_username", "ada")
            page.fill("#id_password", browser.PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(self.url("/"))
            header = page.evaluate(
                "() => fetch(location.href).then(r => r.headers.get('content-security-policy'))"
            )
            self.assertIn("script-src 'self'", header)
            for path in (
                "/",
                f"/jobs/{job.pk}/",
                "/presets/",
                "/tokens/",
                "/audit/",
                "/decisions/",
                "/fleet/",
            ):
                page.goto(self.url(path))
                page.wait_for_selector("body[data-ready=true]")
            page.goto(self.url("/"))
            page.wait_for_selector(f'tr[data-job="{job.pk}"]')
        finally:
            context.close()
        self.assertEqual(violations, [], "CSP violations")
        self.assertEqual(errors, [], "JavaScript errors under the CSP")

    def test_operator_pages_tokens_presets_audit_decisions(self) -> None:
        self.login()
        self.page.on("dialog", lambda dialog: dialog.accept())
        # Tokens: the key is shown once, then only its prefix.
        self.page.goto(self.url("/tokens/"))
        self.page.fill("#t-name", "ci-prod")
        self.page.click("#token-form button[type=submit]")
        key = self.page.inner_text("#new-token-key")
        self.assertGreater(len(key), 20)
        self.shot("tokens")
        self.page.reload()
        self.page.wait_for_selector("body[data-ready=true]")
        self.assertNotIn(key, self.page.content())
        self.page.click("text=Revoke ci-prod")
        self.page.wait_for_selector("#tokens-table td:text-is('revoked')")
        # Presets: create, then delete.
        self.page.goto(self.url("/presets/"))
        self.page.fill("#p-name", "team-default")
        self.page.fill("#p-description", "recover with a dump backstop")
        self.page.click("#preset-save")
        self.page.wait_for_selector('tr[data-preset="team-default"]')
        self.shot("presets")
        self.page.click("text=Delete team-default")
        self.page.wait_for_selector('tr[data-preset="team-default"]', state="detached")
        # Audit log: what we just did, newest first.
        self.page.goto(self.url("/audit/"))
        self.page.wait_for_selector("#audit-table tbody tr")
        self.assertIn("preset", self.page.inner_text("#audit-table"))
        self.shot("audit")
        self.page.goto(self.url("/decisions/"))
        self.page.wait_for_selector("body[data-ready=true]")
        self.shot("decisions")

    def test_in_effect_revision_and_what_waits_are_shown_in_the_header_and_what_changes(self) -> None:
        """Issue #13: created with revision 1; revision 2 is written but waits for a recreation."""
        from apps.audit.actors import Actor
        from apps.jobs.incarnations import incarnation_observe_podgroup
        from apps.policies.services import policy_revision_create

        job = self.live_job("in-effect")
        actor = Actor(name="pipeline")
        policy_revision_create(
            job=job, spec={"strategies": ["retry", "recover", "dump"]}, actor=actor, push=False
        )
        # The PodGroup as the operator created it from the job rendered for revision 1.
        created = {
            "metadata": {
                "name": f"{job.name}-{job.uid}",
                "uid": str(uuid.uuid4()),
                "creationTimestamp": "2026-08-21T10:00:00Z",
                "labels": {"fault-scheduling": "grace", "process-recover-enable": "on"},
                "annotations": {"recover-strategy": "retry,recover,dump", c.ANNOTATION_POLICY_REVISION: "1"},
            }
        }
        incarnation_observe_podgroup(job, created, "ingester")
        policy_revision_create(job=job, spec={"strategies": ["dump"]}, actor=actor, push=False)
        self.login()
        self.page.goto(self.url(f"/jobs/{job.pk}/"))
        header = self.page.locator("#fact-in-effect")
        header.wait_for()
        self.assertIn("revision 1 (the job was created with it)", header.inner_text())
        waiting = self.page.locator('#job-in-effect li[data-waits-for="recreate"]')
        waiting.wait_for()
        self.assertIn("recover-strategy", waiting.inner_text())
        self.assertIn("written, waits for the job to be recreated", waiting.inner_text())
        # The push state is labelled as written, never as in effect.
        self.assertIn("written", self.page.inner_text("#fact-sync"))
        # The form's "What changes" says the same next to the preview.
        form_view = self.page.locator('#form-in-effect li[data-waits-for="recreate"]')
        form_view.wait_for()
        self.assertIn("revision 2", form_view.inner_text())
        self.assertIn("In effect: revision 1", self.page.inner_text("#form-in-effect"))
        self.page.wait_for_selector('#effects li[data-when="recreate"]')
        self.shot("job-in-effect")

    def test_what_if_panel_simulates_the_draft_policy(self) -> None:
        self.open_live_job()
        self.page.check("#strategy-retry")
        self.page.check("#strategy-recover")
        self.page.click("#tab-whatif")
        self.page.select_option("#faults-list select[data-key='type']", "uce")
        self.page.select_option("#faults-list select[data-key='attempts']", "false,true")
        self.page.click("#whatif-run")
        self.page.wait_for_selector("#whatif-result section.card table tbody tr")
        steps = self.page.inner_text("#whatif-result")
        self.assertIn("retry", steps)
        self.shot("job-whatif")

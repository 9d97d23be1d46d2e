"""Browser test of strategy advice (issue #18): the panel under the policy form and the jobs list's
"Could save" column and filter. Same server, emulator and Chromium as test_dashboard.py."""

from __future__ import annotations

from apps.jobs.models import TrainingJob
from apps.policies.models import PolicyRevision, PolicySync
from tests.support import browser
from tests.support.advice import add_incident, add_revision, month_old_training_job


class AdviceBrowserTests(browser.BrowserTestCase):
    def seeded_job(self) -> TrainingJob:
        """Current policy exit + Job-level rescheduling; five UCE faults that retry would absorb."""
        job = month_old_training_job(self.cluster, "advised")
        add_revision(job, {"strategies": [], "fault_scheduling": "grace"}, sync="applied")
        for _ in range(5):
            add_incident(job)
        return job

    def test_advice_panel_ranks_explains_and_fills_the_form_without_applying(self) -> None:
        job = self.seeded_job()
        quiet = month_old_training_job(self.cluster, "quiet")
        self.login()
        self.page.goto(self.url(f"/jobs/{job.pk}/"))
        self.page.wait_for_selector("#advice-panel[data-ready=true]")
        first = self.page.locator("#advice-candidates tbody tr").first
        self.assertIn("retry", first.inner_text())
        self.assertIn("no rollback", first.inner_text())
        self.assertGreater(self.page.locator(".advice-bars li").count(), 2)
        self.page.click("#advice-assumptions-box summary")
        self.assertIn("published", self.page.inner_text("#advice-assumptions"))
        self.shot("job-advice")
        # Editing an assumption re-prices: the checkpoint period becomes a user figure.
        self.page.fill("#advice-checkpoint", "7200")
        self.page.wait_for_function(
            "() => (document.querySelector('#advice-assumptions tr[data-name=checkpoint_period_s]') || {})"
            ".textContent?.includes('7200')"
        )
        self.assertIn("user", self.page.inner_text("#advice-assumptions tr[data-name=checkpoint_period_s]"))
        revisions = PolicyRevision.objects.filter(job=job).count()
        syncs = PolicySync.objects.filter(job=job).count()
        self.assertFalse(self.page.is_checked("#strategy-retry"))
        first.locator("button.advice-use").click()
        self.assertTrue(self.page.is_checked("#strategy-retry"))
        self.page.wait_for_selector("text=save and apply yourself")
        # "Use this" only fills the form: no revision, no push.
        self.assertEqual(PolicyRevision.objects.filter(job=job).count(), revisions)
        self.assertEqual(PolicySync.objects.filter(job=job).count(), syncs)

        # The jobs list: the advised job could save NPU-hours (priced by the panel's default request);
        # the quiet job has no figure and is filtered out.
        self.page.goto(self.url("/"))
        self.page.wait_for_selector("body[data-ready=true]")
        row = self.page.locator(f'tr[data-job="{job.pk}"]')
        saved = float(row.locator("td").last.inner_text())
        self.assertGreater(saved, 1)
        self.assertEqual(self.page.locator(f'tr[data-job="{quiet.pk}"] td').last.inner_text(), "—")
        self.page.fill("#f-could_save", "1")
        self.page.wait_for_function("document.querySelectorAll('#jobs-table tbody tr').length === 1")
        self.assertIn("could_save_min=1", self.page.url)
        self.shot("jobs-could-save")

"""Browser test of the jobs overview at fleet size (issue #26): server-side pages with the total, a
sort from a column header (aria-sort), a filter, and a live update that re-reads one row and never
the list. Same server, emulator and Chromium as test_dashboard.py."""

from __future__ import annotations

import re

from apps.jobs.models import TrainingJob
from tests.support import browser

DASH = "\u2013"  # the page writes ranges with an en dash between the numbers


class OverviewBrowserTests(browser.BrowserTestCase):
    def seed(self, n: int) -> list[TrainingJob]:
        return TrainingJob.objects.bulk_create(
            [
                TrainingJob(
                    cluster=self.cluster,
                    namespace="team-a" if i % 2 else "team-b",
                    name=f"job-{i:03d}",
                    phase="Running",
                    replicas={"Master": 1, "Worker": 1},
                    npus_per_pod=8,
                )
                for i in range(n)
            ]
        )

    def count_text(self) -> str:
        return self.page.inner_text("#job-count")

    def wait_count(self, text: str) -> None:
        self.page.wait_for_function(
            "t => document.getElementById('job-count').textContent.startsWith(t)", arg=text
        )

    def test_pages_sort_filter_total_and_a_live_row(self) -> None:
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        jobs = self.seed(120)
        lists: list[str] = []
        rows: list[str] = []
        self.page.on(
            "request",
            lambda r: (
                lists.append(r.url)
                if "/ui/jobs.json" in r.url
                else (rows.append(r.url) if re.search(r"/ui/jobs/\d+\.json", r.url) else None)
            ),
        )
        self.login()
        self.page.wait_for_selector("body[data-ready=true]")
        self.assertTrue(self.count_text().startswith(f"Jobs 1{DASH}50 of 120"), self.count_text())
        self.assertEqual(self.page.locator("#jobs-table tbody tr").count(), 50)
        # Paging: the next page from the server, the URL says where we are.
        self.page.click("#page-next")
        self.wait_count(f"Jobs 51{DASH}100 of 120")
        self.assertIn("offset=50", self.page.url)
        self.assertEqual(self.page.inner_text("#page-of"), "Page 2 of 3")
        # Sorting from the header, with the keyboard: ascending, then descending, back to page 1.
        header = self.page.locator('#jobs-table th[data-sort="name"]')
        header.locator("button").focus()
        self.page.keyboard.press("Enter")
        self.wait_count(f"Jobs 1{DASH}50 of 120, sorted by name")
        self.assertEqual(header.get_attribute("aria-sort"), "ascending")
        self.page.keyboard.press("Enter")
        self.wait_count(f"Jobs 1{DASH}50 of 120, sorted by name (descending)")
        self.assertEqual(header.get_attribute("aria-sort"), "descending")
        first = self.page.locator("#jobs-table tbody tr").first
        self.assertIn("job-119", first.inner_text())
        # A filter: the server counts what matches.
        self.page.select_option("#f-namespace", "team-b")
        self.wait_count(f"Jobs 1{DASH}50 of 60")
        self.assertIn("namespace=team-b", self.page.url)
        self.shot("jobs-overview-paged")
        # Live: a job on this page changes; its row alone is read again, the list is not.
        self.page.wait_for_selector('#conn-state[data-state="live"]')
        job = next(j for j in jobs if j.name == "job-118")
        TrainingJob.objects.filter(pk=job.pk).update(phase="Failed")
        lists_before = len(lists)
        row = self.page.locator(f'tr[data-job="{job.pk}"] td.phase')
        for _ in range(3):  # the subscription may still be on its way: a second frame then arrives
            self.record(job, kind="job.phase_changed", data={"phase": "Failed"}, severity="error")
            try:
                self.page.wait_for_function(
                    "id => document.querySelector(`tr[data-job='${id}'] td.phase`).textContent === 'Failed'",
                    arg=job.pk,
                    timeout=3_000,
                )
                break
            except PlaywrightTimeout:  # not yet subscribed when the frame went out: send another
                continue
        self.assertEqual(row.inner_text(), "Failed")
        self.assertIn("job-118 updated: Failed", self.page.inner_text("#row-updates"))
        self.assertTrue(any(f"/ui/jobs/{job.pk}.json" in url for url in rows), rows)
        self.assertEqual(len(lists), lists_before, "a live update re-read the list")
        self.assertTrue(self.count_text().startswith(f"Jobs 1{DASH}50 of 60"))

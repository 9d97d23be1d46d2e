"""Browser test of the fleet page (issue #26): the charts drawn by the vendored uPlot, their table
alternatives, and links from a figure into the jobs behind it. Same server and Chromium as
test_dashboard.py, whose CSP test loads this page with the policy enforced; the fleet is
``tests.support.fleet``'s."""

from __future__ import annotations

import tempfile
from pathlib import Path

from apps.fleet.summaries import scheduled_refresh_recent
from tests.support import browser
from tests.support.fleet import small_fleet

# Pixels a chart's canvas has painted (not transparent): axes, grid and series.
PAINTED = """(selector) => {
  const canvas = document.querySelector(selector + ' canvas');
  if (!canvas) return 0;
  const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let painted = 0;
  for (let i = 3; i < data.length; i += 4) if (data[i] > 0) painted++;
  return painted;
}"""


class FleetBrowserTests(browser.BrowserTestCase):
    def test_charts_tables_and_links_into_the_jobs(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            fleet = small_fleet(Path(tmp))
        scheduled_refresh_recent()
        self.login()
        self.page.goto(self.url("/fleet/"))
        self.page.wait_for_selector("body[data-ready=true]")
        self.page.wait_for_selector("#chart-faults[data-drawn=true] canvas")
        self.page.wait_for_selector("#chart-lost[data-drawn=true] canvas")
        for chart in ("#chart-faults", "#chart-lost"):
            self.assertGreater(self.page.evaluate(PAINTED, chart), 1_000, f"{chart} is blank")
            self.assertTrue(self.page.get_attribute(chart, "aria-label"))
        self.assertIn("Faults", self.page.inner_text("#fleet-totals"))
        self.assertIn("4", self.page.inner_text("#stat-faults"))

        # The table alternatives: one row per day of the window; every scope with its figures.
        self.assertEqual(self.page.locator("#table-faults tbody tr").count(), 7)
        self.page.click("#table-faults-box summary")
        self.assertIn("uce", self.page.inner_text("#table-faults thead"))
        lost = self.page.inner_text("#table-lost")
        self.assertIn("east / team-a", lost)
        self.assertIn("18.51", lost)  # the hand-computed total (tests/fleet/test_lost_by_hand.py)
        self.assertIn("retry", self.page.inner_text("#table-mttr"))
        self.shot("fleet")

        # A namespace's figure opens the jobs overview filtered to that namespace.
        self.page.click('#table-lost tr[data-scope="east / team-a"] th a')
        self.page.wait_for_url("**/?cluster=east&namespace=team-a")
        self.page.wait_for_selector("body[data-ready=true]")
        self.assertIn("gpt", self.page.inner_text("#jobs-table"))

        # The costliest job links to its page.
        self.page.goto(self.url("/fleet/?window_days=28"))
        self.page.wait_for_selector("body[data-ready=true]")
        first = self.page.locator("#table-top tbody tr").first
        self.assertIn("gpt", first.inner_text())
        first.locator("th a").click()
        self.page.wait_for_url(self.url(f"/jobs/{fleet.gpt.pk}/"))
        self.page.wait_for_selector("body[data-ready=true]")
        self.assertIn("gpt", self.page.inner_text("h1"))

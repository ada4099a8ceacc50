"""A running job's progress on the dashboard, in a real headless Chromium (PRODUCT §16): a bar
on the job page and in the jobs list, moving live (``event: progress`` on the SSE stream)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from served import ADMIN, wait_until
from services import BACKENDS

import duly


@pytest.mark.parametrize("kind", BACKENDS)
def test_the_progress_bar_moves_live_on_the_job_page_and_in_the_list(
    make_dash: Any, kind: str
) -> None:
    halfway, finish = threading.Event(), threading.Event()

    def setup(app: duly.App) -> None:
        @app.task(name="t.stepped")
        def stepped() -> str:
            job = duly.current_job()
            job.set_progress(0.4, "step 2 of 5")
            halfway.wait(30)
            job.set_progress(0.8, "step 4 of 5")
            finish.wait(30)
            return "done"

    dash = make_dash(kind, setup=setup)
    try:
        job = dash.app.tasks["t.stepped"].enqueue()
        page = dash.page(ADMIN, f"/jobs/{job.id}")
        page.wait_for_selector('[class="live live"]')  # the event stream is open: nothing is missed
        page.wait_for_selector('#job[data-status="queued"]')
        dash.worker()
        bar = page.locator("#job-progress progress")
        bar.wait_for()
        assert bar.get_attribute("value") == "0.4"
        assert "40% step 2 of 5" in page.locator("#job-progress").inner_text()
        page.evaluate("window.__same_document = true")
        halfway.set()
        wait_until(lambda: bar.get_attribute("value") == "0.8", 20, "the bar to move to 80%")
        assert "80% step 4 of 5" in page.locator("#job-progress").inner_text()
        assert page.evaluate("window.__same_document") is True  # live: no reload

        jobs = dash.page(ADMIN, "/jobs")
        row = jobs.locator(f'#job-list tr[data-id="{job.id}"]')
        row.wait_for()
        assert row.locator("progress").get_attribute("value") == "0.8"
        assert "80% step 4 of 5" in row.inner_text()
    finally:
        halfway.set()
        finish.set()
    wait_until(lambda: page.locator("#job").get_attribute("data-status") == "succeeded", 20, "done")

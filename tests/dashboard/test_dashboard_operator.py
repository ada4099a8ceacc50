"""The operator controls of the dashboard (PRODUCT §15) in a real headless Chromium: pausing
and resuming a queue from the Queues page, cancelling every job of a filter from the Jobs
page."""

from __future__ import annotations

import pytest
from served import ADMIN, READ, Dash, wait_until

pytestmark = pytest.mark.timeout(120)


def status(dash: Dash, job_id: str) -> str:
    info = dash.app.get_job(job_id)
    assert info is not None
    return info.status


def test_pause_and_resume_a_queue_from_the_queues_page(dash: Dash) -> None:
    job = dash.app.tasks["t.add"].enqueue(1, 2)
    page = dash.page(ADMIN, "/queues")
    state = page.locator('.queue-state[data-queue="default"]')
    state.wait_for()
    assert "running" in state.inner_text()
    state.locator('button[data-action="pause"]').click()
    page.locator('.queue-state[data-queue="default"] .status-paused').wait_for()
    assert [q.paused for q in dash.app.queues() if q.name == "default"] == [True]
    dash.run_all()
    assert status(dash, job.id) == "queued"  # a paused queue gives its workers nothing

    page.locator('.queue-state[data-queue="default"] button[data-action="resume"]').click()
    page.locator('.queue-state[data-queue="default"] button[data-action="pause"]').wait_for()
    assert not [q for q in dash.app.queues() if q.paused]
    dash.run_all()
    wait_until(lambda: status(dash, job.id) == "succeeded", 20, "the job to run once resumed")


def test_a_read_token_sees_the_state_but_no_button(dash: Dash) -> None:
    dash.app.tasks["t.add"].enqueue(1, 2)
    dash.app.pause("default")
    page = dash.page(READ, "/queues")
    page.locator('.queue-state[data-queue="default"] .status-paused').wait_for()
    assert page.locator(".queue-state button").count() == 0


def test_bulk_cancel_cancels_every_queued_job_of_the_filter(dash: Dash) -> None:
    add = dash.app.tasks["t.add"]
    jobs = [add.options(key="bulk").enqueue(i, i) for i in range(3)]
    other = add.options(key="keep").enqueue(9, 9)
    page = dash.page(ADMIN, "/jobs?status=queued&key=bulk")
    page.wait_for_selector(f'tr[data-id="{jobs[0].id}"]')
    assert page.locator("#bulk-retry").count() == 0  # queued jobs are not retried
    page.click("#bulk-cancel")
    assert page.locator("#bulk-cancel").inner_text() == "Click again to confirm"
    page.click("#bulk-cancel")
    page.wait_for_selector("text=3 job(s) cancelled")
    assert [status(dash, j.id) for j in jobs] == ["cancelled"] * 3
    assert status(dash, other.id) == "queued"
    reader = dash.page(READ, "/jobs?status=queued")
    reader.wait_for_selector(f'tr[data-id="{other.id}"]')
    assert reader.locator("#bulk-cancel").count() == 0

"""The operator controls of the dashboard (PRODUCT §15) in a real headless Chromium: pausing
and resuming a queue from the Queues page."""

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

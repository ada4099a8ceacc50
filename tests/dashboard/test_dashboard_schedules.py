"""The Periodic page in a real headless Chromium: decorated and stored schedules, the ticks
skipped while a previous job still waited, and an admin removing a stored schedule."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from served import ADMIN, READ, in_thread, wait_until

import duly
from duly._scheduler import Scheduler

pytestmark = pytest.mark.timeout(120)


def _setup(app: duly.App) -> None:
    @app.periodic(every=1, name="t.beat")
    def beat() -> None:
        return None


def _two_laps(app: duly.App) -> Any:
    async def laps() -> None:
        scheduler = Scheduler(app)
        backend = await app.backend()
        await scheduler.run_once(backend)  # the tick due now: its job waits (no worker)
        await asyncio.sleep(1.2)
        await scheduler.run_once(backend)  # the next tick overlaps it: skipped

    return laps


def test_the_periodic_page_shows_both_kinds_and_an_admin_removes_a_stored_one(
    make_dash: Any,
) -> None:
    dash = make_dash(setup=_setup)
    app = dash.app
    app.schedule("nightly", app.tasks["t.add"].s(1, 2), cron="0 3 * * *", tz="Europe/Berlin")
    in_thread(_two_laps(app), app)
    page = dash.page(ADMIN, "/periodic")
    page.wait_for_selector('.schedule-name[data-name="nightly"]')
    rows = page.locator("table.grid tbody tr")
    assert rows.count() == 2
    nightly, beat = rows.nth(0), rows.nth(1)  # by name
    assert "decorated" in beat.inner_text() and "every 1s" in beat.inner_text()
    assert int(beat.locator(".skipped").get_attribute("data-skipped") or 0) >= 1
    assert "skipped" in beat.locator(".skipped").inner_text()
    assert "stored" in nightly.inner_text() and "0 3 * * *" in nightly.inner_text()
    assert "Europe/Berlin" in nightly.inner_text()
    assert beat.locator('button[data-action="remove"]').count() == 0  # decorated: in code
    nightly.locator('button[data-action="remove"]').click()
    page.wait_for_selector('.schedule-name[data-name="nightly"]', state="detached")
    wait_until(lambda: [s.kind for s in app.schedules()] == ["decorated"], 10, "the removal")


def test_a_read_token_sees_no_remove_button(make_dash: Any) -> None:
    dash = make_dash()
    dash.app.schedule("nightly", dash.app.tasks["t.add"].s(1, 2), every=3600)
    page = dash.page(READ, "/periodic")
    page.wait_for_selector('.schedule-name[data-name="nightly"]')
    assert page.locator("button.action").count() == 0
    status = page.evaluate(
        """async () => {
            const csrf = (await (await fetch("api/v1/session")).json()).csrf;
            const headers = {"X-Duly-CSRF": csrf};
            return (await fetch("api/v1/schedules/nightly", {method: "DELETE", headers})).status;
        }"""
    )
    assert status == 403
    assert [s.name for s in dash.app.schedules()] == ["nightly"]

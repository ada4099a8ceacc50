"""The dashboard's watch view shows each check of a watch (PRODUCT §17), in a real Chromium."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from served import ADMIN
from services import BACKENDS


@pytest.mark.parametrize("kind", BACKENDS)
def test_the_watch_view_lists_each_check_with_its_outcome(make_dash: Any, kind: str) -> None:
    calls: list[int] = []

    def setup(app: Any) -> None:
        @app.watch(name="t.unshipped", timeout=0.3)
        async def unshipped(order_id: int) -> timedelta | None:
            import asyncio

            calls.append(order_id)
            if len(calls) == 1:
                return timedelta(seconds=0)  # check again at once
            await asyncio.sleep(5)  # the second check runs past its timeout
            return None

    dash = make_dash(kind, setup=setup)
    job = dash.app.tasks["t.unshipped"].start(order_id=42)
    dash.run_all()
    assert dash.app.get_job(job.id).status == "failed"
    page = dash.page(ADMIN, "/watches?active=false")
    cell = page.locator("details.checks")
    cell.wait_for()
    assert "2 · last timeout" in cell.locator("summary").inner_text()
    cell.locator("summary").click()
    rows = page.locator("details.checks tr.check")
    rows.first.wait_for()
    # Newest first: the timed-out check, then the one that asked for another.
    assert [rows.nth(i).get_attribute("data-outcome") for i in range(rows.count())] == [
        "timeout",
        "again",
    ]
    assert "timeout" in rows.nth(0).inner_text() and "ms" in rows.nth(1).inner_text()

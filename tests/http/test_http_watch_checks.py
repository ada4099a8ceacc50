"""The watch view of the HTTP API shows each check of a watch (PRODUCT §17), on every backend."""

from __future__ import annotations

from datetime import datetime

import pytest
from http_harness import Hub

pytestmark = pytest.mark.timeout(60)


def test_the_watch_view_lists_each_check(hub: Hub) -> None:
    job = hub.app.tasks["watch_link"].start(789)  # type: ignore[attr-defined]
    [active] = hub.get("/api/v1/watches")["watches"]
    assert active["history"] == []
    hub.run(job.id)
    [ended] = hub.get("/api/v1/watches", params={"active": "false"})["watches"]
    assert ended["state"] == "done" and ended["checks"] == 1
    [check] = ended["history"]
    assert set(check) == {"at", "seconds", "outcome"}
    assert check["outcome"] == "done" and check["seconds"] >= 0 and check["at"].endswith("Z")
    started, at, last = (
        datetime.fromisoformat(ended["started_at"]),
        datetime.fromisoformat(check["at"]),
        datetime.fromisoformat(ended["last_check"]),
    )
    assert started <= at <= last

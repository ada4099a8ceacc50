"""``duly schedules`` and ``duly unschedule NAME`` (PRODUCT §15) in a real subprocess."""

from __future__ import annotations

import json

import pytest
from e2e_harness import E2E


@pytest.mark.timeout(120)
def test_schedules_lists_and_unschedule_removes(e2e: E2E) -> None:
    e2e.app.schedule("nightly", e2e.tasks.mark.s(7), cron="0 3 * * *", tz="Europe/Berlin")
    e2e.app.schedule("often", e2e.tasks.mark.s(8), every=30, overlap="queue")
    listed, human = e2e.cli_many(
        ("schedules", "--app", "e2e_tasks:app", "--json"), ("schedules", "--app", "e2e_tasks:app")
    )
    assert listed.returncode == 0, listed.stderr
    found = json.loads(listed.stdout)
    assert [(s["name"], s["kind"], s["task"]) for s in found] == [
        ("nightly", "stored", "e2e.mark"),
        ("often", "stored", "e2e.mark"),
    ]
    assert (found[0]["cron"], found[0]["tz"], found[0]["args"]) == (
        "0 3 * * *",
        "Europe/Berlin",
        [7],
    )
    assert (found[1]["every"], found[1]["overlap"], found[1]["skipped"]) == (30.0, "queue", 0)
    assert human.returncode == 0, human.stderr
    assert "nightly" in human.stdout and "cron 0 3 * * * (Europe/Berlin)" in human.stdout
    assert "every 30s" in human.stdout
    removed = e2e.cli("unschedule", "nightly", "--app", "e2e_tasks:app")
    assert removed.returncode == 0 and "removed the schedule nightly" in removed.stdout
    again = e2e.cli("unschedule", "nightly", "--app", "e2e_tasks:app")
    assert again.returncode == 1
    assert again.stderr.strip() == "duly: no stored schedule named 'nightly'"
    assert [s.name for s in e2e.app.schedules()] == ["often"]

"""``duly groups ID`` (PRODUCT §8): a group's counts, completion, callback and members."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from click.testing import CliRunner

import duly
from duly._cli import cli


def test_groups_shows_progress_and_members(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'duly.db'}"
    app = duly.App(url)

    @app.task(name="t.step", retries=0)
    def step(n: int) -> int:
        if n == 2:
            raise ValueError("boom")
        return n

    @app.task(name="t.done")
    def done() -> None:
        return None

    group = app.group([step.s(1), step.s(2)], on_complete=done.s())
    runner = CliRunner()
    before = json.loads(runner.invoke(cli, ["groups", group.id, "--json", "--url", url]).output)
    assert (before["pending"], before["completed_at"], before["callback_job_id"]) == (2, None, None)
    assert {m["id"] for m in before["members"]} == {j.id for j in group.jobs}
    asyncio.run(app.worker(burst=True).run())
    app.close()
    shown = runner.invoke(cli, ["groups", group.id, "--json", "--url", url])
    assert shown.exit_code == 0, shown.output
    after = json.loads(shown.output)
    assert (after["succeeded"], after["failed"], after["pending"]) == (1, 1, 0)
    assert after["callback_job_id"] == group.id and after["completed_at"] is not None
    assert {m["status"] for m in after["members"]} == {"succeeded", "failed"}
    text = runner.invoke(cli, ["groups", group.id, "--url", url])
    assert text.exit_code == 0 and "1 succeeded, 1 failed" in text.output
    unknown = runner.invoke(cli, ["groups", "nope", "--url", url])
    assert unknown.exit_code == 1 and "no group nope" in unknown.output

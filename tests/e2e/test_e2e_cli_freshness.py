"""``duly forget NAME SCOPE`` (PRODUCT §17): a deleted team's scope is forgotten from the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import duly
from duly._cli import cli


def test_forget_removes_a_scope_given_only_the_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'duly.db'}"
    app = duly.App(url)

    def sync(scope: str, full: bool) -> None:
        return None

    envs = app.freshness("envs", sync=sync, max_staleness=60)
    envs.check("team:1")
    envs.check("team:2")
    runner = CliRunner()
    gone = runner.invoke(cli, ["forget", "envs", "team:1", "--json", "--url", url])
    assert gone.exit_code == 0, gone.output
    assert json.loads(gone.output) == {"freshness": "envs", "scope": "team:1", "forgotten": True}
    assert [f.scope for f in envs.scopes()] == ["team:2"]
    again = runner.invoke(cli, ["forget", "envs", "team:1", "--url", url])
    assert again.exit_code == 0 and "envs team:1: not known" in again.output
    bad = runner.invoke(cli, ["forget", "envs", "a\x1fb", "--url", url])
    assert bad.exit_code == 2 and "scope" in bad.output
    app.close()

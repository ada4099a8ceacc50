"""``duly freshness [NAME] [--stale] [--json]``, ``duly refresh NAME SCOPE`` (PRODUCT §7) and
``duly forget NAME SCOPE`` (PRODUCT §17)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from duly._app import App
from duly._cli.common import (
    app_options,
    echo_json,
    fail,
    load_app,
    missing_database,
    translate_errors,
)
from duly._freshness import Freshness, Mirror, forget_scope, scopes_of

__all__ = ["forget", "freshness", "refresh"]

_STYLE = {"current": "green", "stale": "red", "never": "yellow"}


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _score(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:.2f}"


def _mirror(app: App, name: str) -> Mirror:
    mirror = app.mirrors.get(name)
    if mirror is None:
        known = ", ".join(sorted(app.mirrors)) or "none; give --app MODULE:APP"
        fail(f"no freshness named {name!r} (known: {known})", 2)
    return mirror


@click.command()
@click.argument("name", required=False)
@click.option("--stale", is_flag=True, help="Only stale scopes (score >= 1, or never synced).")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@app_options
@translate_errors
def freshness(
    name: str | None,
    stale: bool,
    limit: int,
    as_json: bool,
    app_path: str | None,
    url: str | None,
) -> None:
    """Scopes of a freshness (or of every one the app registers), stalest first, with their
    last error."""
    app = load_app(app_path, url)
    names = [name] if name is not None else sorted(app.mirrors)
    if not names:
        fail("no freshness known: give NAME, or --app MODULE:APP (whose freshness to list)", 2)
    missing = missing_database(app)
    rows: list[tuple[str, Freshness]] = []
    for each in names:
        if not missing:
            found = app.run_sync(scopes_of(app, each, stale, limit))
            rows += [(each, f) for f in found]
    if as_json:
        echo_json([{"freshness": each, **f.to_dict()} for each, f in rows])
        return
    table = Table(box=None)
    for column in ("freshness", "scope", "state", "score", "last synced", "syncing", "failures"):
        table.add_column(column, no_wrap=True)
    table.add_column("next due", no_wrap=True)
    table.add_column("last error")
    for each, f in rows:
        table.add_row(
            each,
            f.scope,
            f"[{_STYLE[f.state]}]{f.state}[/]",
            _score(f.score),
            _when(f.last_synced_at),
            "yes" if f.syncing else "",
            str(f.failures or ""),
            _when(f.next_due),
            f.last_error or "",
        )
    Console().print(table)
    if not rows:
        click.echo("no stale scopes" if stale else "no scopes known yet")


@click.command()
@click.argument("name")
@click.argument("scope")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@app_options
@translate_errors
def refresh(name: str, scope: str, as_json: bool, app_path: str | None, url: str | None) -> None:
    """Refresh SCOPE of freshness NAME now: a full sync, even when current (one at a time)."""
    app = load_app(app_path, url)
    f = _mirror(app, name).request(scope)
    data: dict[str, Any] = f.to_dict()
    if as_json:
        echo_json(data)
        return
    assert f.job is not None  # a request always has a sync: its own or the running one
    what = "already syncing" if f.job.deduplicated else "sync enqueued"
    click.echo(f"{name} {scope}: {what} (job {f.job.id}); {f.state}, score {_score(f.score)}")


@click.command()
@click.argument("name")
@click.argument("scope")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@app_options
@translate_errors
def forget(name: str, scope: str, as_json: bool, app_path: str | None, url: str | None) -> None:
    """Forget SCOPE of freshness NAME (e.g. a deleted team): its state and its baseline syncs."""
    app = load_app(app_path, url)
    try:
        forgotten = app.run_sync(forget_scope(app, name, scope))
    except ValueError as exc:
        fail(str(exc), 2)
    if as_json:
        echo_json({"freshness": name, "scope": scope, "forgotten": forgotten})
        return
    click.echo(f"{name} {scope}: {'forgotten' if forgotten else 'not known'}")

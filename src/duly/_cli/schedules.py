"""``duly schedules`` and ``duly unschedule NAME``: the periodic schedules, decorated and
stored, and removing a stored one (PRODUCT §15)."""

from __future__ import annotations

from datetime import datetime

import click
import msgspec
from rich.console import Console
from rich.table import Table

from duly._cli.common import app_options, echo_json, fail, load_app, translate_errors
from duly._schedules import ScheduleInfo

__all__ = ["schedules", "unschedule"]


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.isoformat(timespec="seconds")


def _schedule(info: ScheduleInfo) -> str:
    if info.cron is not None:
        return f"cron {info.cron} ({info.tz})"
    return f"every {info.every:g}s"


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the ScheduleInfo fields).")
@app_options
@translate_errors
def schedules(as_json: bool, app_path: str | None, url: str | None) -> None:
    """Every periodic schedule: MODULE:APP's @app.periodic tasks and the stored ones
    (app.schedule), with their next and last tick and the ticks they skipped."""
    app = load_app(app_path, url)
    found = app.schedules()
    if as_json:
        echo_json(msgspec.to_builtins(found))
        return
    table = Table("name", "kind", "task", "schedule", "next tick", "last tick", "skipped", box=None)
    for info in found:
        table.add_row(
            info.name,
            info.kind,
            info.task,
            _schedule(info),
            _when(info.next_tick),
            _when(info.last_tick),
            str(info.skipped),
        )
    Console().print(table)
    if not found:
        click.echo("no schedules: no periodic task in this app, and none stored")


@click.command()
@click.argument("name")
@app_options
@translate_errors
def unschedule(name: str, app_path: str | None, url: str | None) -> None:
    """Remove the stored schedule NAME (it ticks no more; a decorated one lives in code)."""
    app = load_app(app_path, url)
    if not app.unschedule(name):
        fail(f"no stored schedule named {name!r}", 1)
    click.echo(f"removed the schedule {name}")

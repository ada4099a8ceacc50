"""``duly groups ID``: one group's progress and its members (PRODUCT §8)."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console
from rich.table import Table

from duly._cli.common import app_options, echo_json, find_or_fail, load_app, translate_errors
from duly._groups import GroupInfo, is_group_id

__all__ = ["groups"]


def _iso(info: GroupInfo, name: str) -> str | None:
    value = getattr(info, name)
    return None if value is None else value.isoformat()


def group_json(info: GroupInfo, members: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``--json`` object: the GroupInfo fields, times as ISO 8601, and the members."""
    return {
        "id": info.id,
        "key": info.key,
        "total": info.total,
        "succeeded": info.succeeded,
        "failed": info.failed,
        "cancelled": info.cancelled,
        "pending": info.pending,
        "created_at": _iso(info, "created_at"),
        "completed_at": _iso(info, "completed_at"),
        "callback_job_id": info.callback_job_id,
        "members": members,
    }


@click.command()
@click.argument("group_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (stable keys).")
@app_options
@translate_errors
def groups(group_id: str, as_json: bool, app_path: str | None, url: str | None) -> None:
    """Show one group: its outcome counts, completion, callback and members (with a key, the
    jobs of that key). Exit 1 if unknown."""
    app = load_app(app_path, url)
    info = find_or_fail(app, "group", group_id, app.get_group)
    members = (
        [
            {"id": j.id, "task": j.task, "status": j.status}
            for j in app.jobs(key=info.key, limit=10_000)
            if not is_group_id(j.id)  # the callback (a group's id) is no member
        ]
        if info.key is not None
        else []
    )
    if as_json:
        echo_json(group_json(info, members))
        return
    console = Console()
    state = "complete" if info.completed_at is not None else "in progress"
    console.print(f"[bold]{info.id}[/]  {state}  key {info.key or '-'}")
    console.print(
        f"{info.total} jobs: {info.succeeded} succeeded, {info.failed} failed, "
        f"{info.cancelled} cancelled, {info.pending} pending"
    )
    console.print(f"created {info.created_at:%Y-%m-%d %H:%M:%S} UTC")
    if info.completed_at is not None:
        console.print(f"completed {info.completed_at:%Y-%m-%d %H:%M:%S} UTC")
    callback = info.callback_job_id or ("(waits)" if info.completed_at is None else "-")
    console.print(f"on_complete job {callback}")
    if members:
        table = Table(box=None)
        for name in ("id", "task", "status"):
            table.add_column(name, no_wrap=True)
        for member in members:
            table.add_row(member["id"], member["task"], member["status"])
        console.print(table)

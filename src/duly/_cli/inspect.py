"""``duly status | jobs | retry | cancel | stats | queues | workers | watches``."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from duly._app import App
from duly._bulk import CANCELLABLE, RETRYABLE
from duly._cli.common import (
    app_options,
    echo_json,
    fail,
    find_or_fail,
    load_app,
    missing_database,
    translate_errors,
    where,
)
from duly._job import JobError, JobInfo
from duly._progress import Progress
from duly._records import STATUSES
from duly._secrets import redact_job, redact_watch
from duly._watch import Watch

F = TypeVar("F", bound=Callable[..., Any])

__all__ = [
    "cancel",
    "jobs",
    "migrate",
    "queues",
    "retry",
    "stats",
    "status",
    "watches",
    "workers",
]

#: The keys of ``duly status --json`` pinned by PRODUCT §0; every other JobInfo field and
#: ``errors`` (each attempt's error, oldest first) come with them.
STATUS_KEYS = (
    "id",
    "task",
    "status",
    "attempts",
    "result",
    "error",
    "enqueued_at",
    "started_at",
    "finished_at",
    "key",
)
_STYLE = {
    "succeeded": "green",
    "failed": "red",
    "running": "cyan",
    "retrying": "yellow",
    "queued": "white",
    "scheduled": "blue",
    "cancelled": "magenta",
}


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _progress_text(progress: Progress) -> str:
    """``42% page 3 of 7 (2026-01-01 10:00:00)``: a job's last reported progress."""
    message = f" {progress.message}" if progress.message else ""
    return f"{progress.fraction:.0%}{message} ({_when(progress.at)})"


def _status_json(info: JobInfo) -> dict[str, Any]:
    data = info.to_dict()
    data["errors"] = [_error_json(e) for e in info.errors]
    return {**{k: data.pop(k) for k in STATUS_KEYS}, **data}


def _error_json(error: JobError) -> dict[str, Any]:
    """One stored failure with its attempt first and its time as ISO 8601."""
    at = error.get("at")
    when = datetime.fromtimestamp(at, UTC).isoformat() if isinstance(at, int | float) else at
    return {"attempt": error.get("attempt"), **error, "at": when}


def _find(app: App, job_id: str) -> JobInfo:
    """The job (secret arguments masked), or exit 1 with one line naming where it was
    looked for."""
    return redact_job(app, find_or_fail(app, "job", job_id, app.get_job))


def _print_errors(console: Console, info: JobInfo) -> None:
    """Earlier attempts' failures as one line each; the last one in full if it is the outcome."""
    errors = info.errors or ([info.error] if info.error else [])
    outcome = errors[-1] if errors and info.status == "failed" else None
    for error in errors:
        if error is outcome:
            continue
        attempt = error.get("attempt")
        which = f"attempt {attempt}" if attempt else "an attempt"
        console.print(
            f"  [yellow]{which} failed:[/] {error.get('type')}: {error.get('message')}",
            highlight=False,
        )
    if outcome is not None:
        console.print(
            f"  [red]error[/]         {outcome.get('type')}: {outcome.get('message')}",
            highlight=False,
        )
        tb = str(outcome.get("traceback") or "").rstrip()
        if tb:
            console.print(tb, style="dim", highlight=False, markup=False)


@click.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (stable keys).")
@app_options
@translate_errors
def status(job_id: str, as_json: bool, app_path: str | None, url: str | None) -> None:
    """Show one job: state, attempts, times, result or error, earlier attempts' errors.
    Exit 1 if unknown."""
    info = _find(load_app(app_path, url), job_id)
    if as_json:
        echo_json(_status_json(info))
        return
    console = Console()
    style = _STYLE.get(info.status, "white")
    console.print(f"[bold]{info.id}[/]  {info.task}  [{style}]{info.status}[/]")
    rows = [
        ("queue", info.queue),
        ("key", info.key or "-"),
        ("priority", str(info.priority)),
        (
            "attempts",
            f"{info.attempts}/{info.max_attempts}" + (f" (lost {info.lost})" if info.lost else ""),
        ),
        ("args", f"{info.args!r} {info.kwargs!r}"),
        ("enqueued", _when(info.enqueued_at)),
        ("scheduled for", _when(info.scheduled_for)),
        ("started", _when(info.started_at)),
        ("finished", _when(info.finished_at)),
        ("worker", info.worker or "-"),
    ]
    if info.progress is not None:
        rows.append(("progress", _progress_text(info.progress)))
    if info.status == "succeeded":
        rows.append(("result", repr(info.result)))
    for name, value in rows:
        console.print(f"  {name:<14}{value}", highlight=False, markup=False)
    _print_errors(console, info)


@click.command()
@click.option("--status", "status_", type=click.Choice(STATUSES), help="Only this state.")
@click.option("--task", default=None, help="Only this task name.")
@click.option("--key", default=None, help="Only jobs enqueued with this key.")
@click.option("--queue", default=None, help="Only this queue.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@app_options
@translate_errors
def jobs(
    status_: str | None,
    task: str | None,
    key: str | None,
    queue: str | None,
    limit: int,
    as_json: bool,
    app_path: str | None,
    url: str | None,
) -> None:
    """List jobs, newest first."""
    app = load_app(app_path, url)
    missing = missing_database(app)
    found = (
        [] if missing else app.jobs(key=key, status=status_, task=task, queue=queue, limit=limit)
    )
    found = [redact_job(app, info) for info in found]
    if as_json:
        echo_json([info.to_dict() for info in found])
        return
    table = Table(box=None)
    for name in ("id", "task", "status", "attempts", "enqueued"):
        table.add_column(name, no_wrap=True)
    table.add_column("key")
    for info in found:
        style = _STYLE.get(info.status, "white")
        table.add_row(
            info.id,
            info.task,
            f"[{style}]{info.status}[/]",
            f"{info.attempts}/{info.max_attempts}",
            _when(info.enqueued_at),
            info.key or "",
        )
    Console().print(table)
    if not found:
        click.echo("no jobs match" + _nothing_there(missing))


def _act(action: str, job_id: str, app_path: str | None, url: str | None) -> None:
    app = load_app(app_path, url)
    info = _find(app, job_id)
    done = app.retry(job_id) if action == "retry" else app.cancel(job_id)
    if not done:
        if action == "retry" and info.status in ("failed", "cancelled"):
            fail(f"cannot retry job {job_id}: another active job holds its unique key")
        allowed = "failed or cancelled" if action == "retry" else "not finished"
        fail(f"cannot {action} job {job_id}: it is {info.status} (must be {allowed})")
    if action == "cancel" and info.status == "running":
        click.echo(
            f"cancel requested for {job_id}: it is running and ends cancelled when its run "
            "returns (an async job is interrupted at its worker's next heartbeat)"
        )
        return
    click.echo(f"{'re-queued' if action == 'retry' else 'cancelled'} {job_id}")


def _bulk_options(statuses: tuple[str, ...], what: str) -> Callable[[F], F]:
    """``--status`` (and the filters) of ``duly retry|cancel --status ...``."""

    def decorate(fn: F) -> F:
        for option in reversed(
            (
                click.option(
                    "--status",
                    "status_",
                    type=click.Choice(statuses),
                    help=f"Instead of JOB_ID: {what} every job in this state (with the filters).",
                ),
                click.option("--queue", default=None, help="With --status: only this queue."),
                click.option("--task", default=None, help="With --status: only this task."),
                click.option("--key", default=None, help="With --status: only this key."),
            )
        ):
            fn = option(fn)
        return fn

    return decorate


def _one_or_many(
    action: str,
    job_id: str | None,
    status_: str | None,
    filters: dict[str, str | None],
    app_path: str | None,
    url: str | None,
) -> None:
    if (job_id is None) == (status_ is None):
        fail(f"duly {action} takes a JOB_ID or --status (with --queue/--task/--key), not both", 2)
    if job_id is not None:
        if any(v is not None for v in filters.values()):
            fail("--queue, --task and --key go with --status", 2)
        _act(action, job_id, app_path, url)
        return
    assert status_ is not None
    app = load_app(app_path, url)
    if action == "retry":
        n = app.retry_many(status_, **filters)
        click.echo(f"re-queued {n} {status_} job(s)")
    else:
        n = app.cancel_many(status_, **filters)
        done = "cancel requested for" if status_ == "running" else "cancelled"
        click.echo(f"{done} {n} {status_} job(s)")


@click.command()
@click.argument("job_id", required=False)
@_bulk_options(RETRYABLE, "re-run")
@app_options
@translate_errors
def retry(
    job_id: str | None,
    status_: str | None,
    queue: str | None,
    task: str | None,
    key: str | None,
    app_path: str | None,
    url: str | None,
) -> None:
    """Re-run a failed or cancelled job, or with --status every matching one."""
    filters = {"queue": queue, "task": task, "key": key}
    _one_or_many("retry", job_id, status_, filters, app_path, url)


@click.command()
@click.argument("job_id", required=False)
@_bulk_options(CANCELLABLE, "cancel")
@app_options
@translate_errors
def cancel(
    job_id: str | None,
    status_: str | None,
    queue: str | None,
    task: str | None,
    key: str | None,
    app_path: str | None,
    url: str | None,
) -> None:
    """Cancel a job that has not finished (a running one: see "Cancelling" in the guide), or
    with --status every matching one."""
    filters = {"queue": queue, "task": task, "key": key}
    _one_or_many("cancel", job_id, status_, filters, app_path, url)


@click.command()
@click.option(
    "--minutes",
    default=60,
    show_default=True,
    type=click.IntRange(1, 1440),
    help="How far back to count.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (per-minute rows).")
@app_options
@translate_errors
def stats(minutes: int, as_json: bool, app_path: str | None, url: str | None) -> None:
    """Successes, failures and retries per task and queue (per-minute counters, 24 h kept)."""
    app = load_app(app_path, url)
    missing = missing_database(app)
    rows = [] if missing else app.stats(minutes)
    if as_json:
        echo_json(
            [
                {
                    "minute": datetime.fromtimestamp(r.minute * 60, UTC).isoformat(),
                    "task": r.task,
                    "queue": r.queue,
                    "succeeded": r.succeeded,
                    "failed": r.failed,
                    "retried": r.retried,
                }
                for r in rows
            ]
        )
        return
    totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in rows:
        total = totals[(r.task, r.queue)]
        total[0] += r.succeeded
        total[1] += r.failed
        total[2] += r.retried
    table = Table(
        "task", "queue", "succeeded", "failed", "retried", box=None, title=f"last {minutes} min"
    )
    for (task, queue), (ok, bad, again) in sorted(totals.items()):
        table.add_row(task, queue, f"[green]{ok}[/]", f"[red]{bad}[/]", f"[yellow]{again}[/]")
    Console().print(table)
    if not totals:
        click.echo("no jobs finished in that window" + _nothing_there(missing))


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@app_options
@translate_errors
def queues(as_json: bool, app_path: str | None, url: str | None) -> None:
    """Every queue with its queued, scheduled and running jobs."""
    app = load_app(app_path, url)
    missing = missing_database(app)
    found = [] if missing else app.queues()
    if as_json:
        echo_json(
            [
                {
                    "name": q.name,
                    "queued": q.queued,
                    "scheduled": q.scheduled,
                    "running": q.running,
                    "paused": q.paused,
                }
                for q in found
            ]
        )
        return
    table = Table("queue", "queued", "scheduled", "running", "paused", box=None)
    for q in found:
        paused = "paused" if q.paused else ""
        table.add_row(q.name, str(q.queued), str(q.scheduled), str(q.running), paused)
    Console().print(table)
    if not found:
        click.echo("no queues yet" + _nothing_there(missing))


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@app_options
@translate_errors
def workers(as_json: bool, app_path: str | None, url: str | None) -> None:
    """Registered worker processes and when each was last seen."""
    app = load_app(app_path, url)
    missing = missing_database(app)
    found = [] if missing else app.workers()
    now = time.time()
    if as_json:
        echo_json(
            [
                {"id": w.id, "started_at": w.started_at, "last_seen": w.last_seen, "info": w.info}
                for w in found
            ]
        )
        return
    table = Table("worker", "started", "last seen", box=None)
    for w in found:
        table.add_row(
            w.id, _when(datetime.fromtimestamp(w.started_at, UTC)), f"{now - w.last_seen:.0f}s ago"
        )
    Console().print(table)
    if not found:
        click.echo("no workers registered" + _nothing_there(missing))


@click.command()
@app_options
@translate_errors
def migrate(app_path: str | None, url: str | None) -> None:
    """Create or upgrade duly's stored format (SQL migrations; Redis format steps). Exit 2 if
    the backend cannot be reached, or holds data of a newer duly."""
    app = load_app(app_path, url)
    versions = app.migrate()
    if versions:
        click.echo("applied migrations " + ", ".join(f"{v:04d}" for v in versions))
        return
    app.ping()  # Redis has no schema to migrate: "up to date" must still mean "reached"
    click.echo(f"schema is up to date in {where(app)}")


def _nothing_there(missing: str | None) -> str:
    """The note that explains an empty answer from a SQLite file that does not exist."""
    return "" if missing is None else f" ({missing} does not exist)"


_WATCH_STYLE = {
    "watching": "cyan",
    "done": "green",
    "ended": "yellow",
    "stopped": "magenta",
    "failed": "red",
}


@click.command()
@click.option("--watch", "watch_name", default=None, help="Only this watch (its task name).")
@click.option("--active", is_flag=True, help="Watches still watching (default: ended ones).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@app_options
@translate_errors
def watches(
    watch_name: str | None,
    active: bool,
    limit: int,
    as_json: bool,
    app_path: str | None,
    url: str | None,
) -> None:
    """Watch history (ended watches with their reason), or --active ones, newest first."""
    app = load_app(app_path, url)
    if watch_name is None and not any(isinstance(t, Watch) for t in app.tasks.values()):
        fail("no watches known: give --app MODULE:APP (whose watches to list) or --watch NAME", 2)
    missing = missing_database(app)
    found = [] if missing else app.watch_history(watch_name, active=active, limit=limit)
    found = [redact_watch(app, row) for row in found]
    if as_json:
        echo_json([row.to_dict() for row in found])
        return
    table = Table(box=None)
    for name in ("watch", "arguments", "state", "checks", "started", "ended", "next check"):
        table.add_column(name, no_wrap=True)
    table.add_column("reason")
    for row in found:
        arguments = ", ".join(
            [*map(repr, row.args), *(f"{k}={v!r}" for k, v in row.kwargs.items())]
        )
        style = _WATCH_STYLE.get(row.state, "white")
        table.add_row(
            row.watch,
            arguments,
            f"[{style}]{row.state}[/]",
            str(row.checks),
            _when(row.started_at),
            _when(row.ended_at),
            _when(row.next_check),
            row.reason or "",
        )
    Console().print(table)
    if not found:
        empty = "no active watches" if active else "no ended watches"
        click.echo(empty + _nothing_there(missing))

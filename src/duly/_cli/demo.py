"""``duly demo``: the main job end to end, on the embedded SQLite default, no server."""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

import click
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from duly._cli.common import translate_errors
from duly._job import Job, JobInfo

__all__ = ["demo"]

_STYLE = {
    "succeeded": "green",
    "failed": "red",
    "running": "cyan",
    "retrying": "yellow",
    "queued": "white",
    "scheduled": "blue",
    "cancelled": "magenta",
}


def _status_table(counts: Counter[str]) -> Table:
    table = Table(box=None, show_header=False)
    for state in ("scheduled", "queued", "running", "retrying", "succeeded", "failed"):
        table.add_row(f"[{_STYLE[state]}]{state}[/]", str(counts.get(state, 0)))
    return table


@click.command()
@click.option(
    "--url",
    envvar="DULY_URL",
    show_envvar=True,
    default=None,
    help="Backend URL (default sqlite:///duly.db).",
)
@click.option(
    "--jobs",
    "count",
    default=24,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="How many thumbnail jobs to enqueue (plus e-mails, retries, delays).",
)
@translate_errors
def demo(url: str | None, count: int) -> None:
    """Enqueue a realistic mix of jobs, run a worker, show live progress and a summary."""
    from duly._demo import build_app

    console = Console()
    app, tasks = build_app(url)
    console.print(f"[bold]duly demo[/] on [cyan]{app.url}[/]\n")
    jobs: list[tuple[str, Job]] = []
    thumbs = app.enqueue_many(tasks["make_thumbnail"].s(i, size=256) for i in range(1, count + 1))
    jobs += [("thumbnail", j) for j in thumbs]
    mails = app.enqueue_many(
        tasks["send_welcome_email"].s(user) for user in range(100, 100 + max(count // 3, 1))
    )
    jobs += [("welcome e-mail", j) for j in mails]
    jobs.append(("payment sync (fails once)", tasks["sync_payments"].enqueue("acct-42")))
    jobs.append(("card charge (fails for good)", tasks["charge_card"].enqueue(1001, 4999)))
    for delay in (2, 3, 4):
        job = tasks["send_reminder"].options(delay=delay, key="user:7").enqueue(7)
        jobs.append((f"reminder in {delay}s", job))
    console.print(
        f"enqueued {len(jobs)} jobs: {len(thumbs)} thumbnails, {len(mails)} e-mails, "
        "1 flaky sync, 1 doomed charge, 3 delayed reminders\n"
    )

    worker = app.worker(concurrency=8, lease=10, install_signal_handlers=False)
    progress = Progress(
        TextColumn("[bold]jobs finished"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
    )
    bar = progress.add_task("jobs", total=len(jobs))
    ids = [job.id for _, job in jobs]

    async def run() -> list[JobInfo | None]:
        runner = asyncio.create_task(worker.run())
        infos: list[JobInfo | None] = []
        with Live(console=console, refresh_per_second=8) as live:
            while True:
                infos = [await app.get_job_async(i) for i in ids]
                counts = Counter[str](info.status for info in infos if info is not None)
                done = sum(1 for info in infos if info is not None and info.finished)
                progress.update(bar, completed=done)
                live.update(Panel(Group(progress, _status_table(counts)), title="worker"))
                if runner.done() or done == len(ids):
                    break
                await asyncio.sleep(0.15)
        worker.stop()
        await runner
        await app.aclose()
        return infos

    started = time.monotonic()
    infos = asyncio.run(run())
    elapsed = time.monotonic() - started
    _summary(console, jobs, infos, elapsed, url)
    app.close()


def _summary(
    console: Console,
    jobs: list[tuple[str, Job]],
    infos: list[JobInfo | None],
    elapsed: float,
    url: str | None,
) -> None:
    counts = Counter(info.status for info in infos if info is not None)
    console.print(
        f"\n[bold]done in {elapsed:.1f}s[/]: "
        + ", ".join(f"[{_STYLE.get(s, 'white')}]{n} {s}[/]" for s, n in sorted(counts.items()))
    )
    table = Table(box=None)
    for name in ("what", "job id", "status", "attempts"):
        table.add_column(name, no_wrap=True)
    table.add_column("result / error")
    shown: set[str] = set()
    for (what, _job), info in zip(jobs, infos, strict=True):
        kind = what.split(" (")[0].split(" in ")[0]
        if info is None or (kind in shown and info.status == "succeeded"):
            continue
        shown.add(kind)
        detail = (
            repr(info.result)
            if info.status == "succeeded"
            else f"{info.error['type']}: {info.error['message']}"
            if info.error
            else ""
        )
        table.add_row(
            what,
            info.id,
            f"[{_STYLE.get(info.status, 'white')}]{info.status}[/]",
            f"{info.attempts}/{info.max_attempts}",
            detail[:70],
        )
    console.print(table)
    failed = next((i for i in infos if i is not None and i.status == "failed"), None)
    if failed is not None and failed.error:
        console.print(
            f"\n[red]{failed.task} failed for good[/] after {failed.attempts} attempts: "
            f"{failed.error['type']}: {failed.error['message']}",
            highlight=False,
        )
    example = failed or next(i for i in infos if i is not None)
    flag = f" --url {url}" if url else ""
    duly = _command_name()
    console.print("\n[bold]Look a job up:[/]")
    for command in (
        f"status {example.id}",
        f"status {example.id} --json",
        "jobs --status failed",
        "jobs --key user:7",
        f"retry {example.id}",
        "stats",
    ):
        console.print(f"  {duly} {command}{flag}", highlight=False, soft_wrap=True)


def _command_name() -> str:
    """``duly`` if that is what runs on PATH, else the path this one was started by."""
    started = Path(sys.argv[0]).resolve()
    if started.name == "__main__.py":  # python -m duly
        return f"{sys.executable} -m duly"
    found = shutil.which("duly")
    if found is not None and Path(found).resolve() == started:
        return "duly"
    try:
        return str(started.relative_to(Path.cwd()))
    except ValueError:
        return str(started)

"""``duly worker module:app``."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

import click

from duly.cli.common import fail, load_app, translate_errors

__all__ = ["default_processes", "resolve_processes", "scheduler", "worker"]


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s",
    )


def _use_fast_loop() -> None:
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def default_processes() -> int:
    """One worker process per CPU core this process may run on (its affinity mask, where the
    OS has one: a container or ``taskset`` limit counts, not the machine's cores)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this OS (macOS, Windows)
        return os.cpu_count() or 1


def resolve_processes(processes: int | None, burst: bool) -> int:
    """``--processes`` as given (or ``$DULY_PROCESSES``); else 1 for a burst (a drain-and-exit
    script), else one per CPU core."""
    if processes is not None:
        return processes
    return 1 if burst else default_processes()


@click.command()
@click.argument("app_path", envvar="DULY_APP", metavar="MODULE:APP")
@click.option(
    "--queues",
    "-q",
    default="default",
    show_default=True,
    help="Comma-separated queues, tried in order (earlier first); 'a:3,b:1' weighs them "
    "instead (each claim tries them in a random order drawn by weight: no queue starves).",
)
@click.option(
    "--concurrency",
    "-c",
    default=16,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="Jobs run at once per process.",
)
@click.option(
    "--processes",
    "-p",
    type=click.IntRange(1, 256),
    envvar="DULY_PROCESSES",
    show_envvar=True,
    show_default="one per CPU core",
    help="Worker processes; with more than one, a supervisor restarts dead ones. "
    "With --burst the default is 1.",
)
@click.option(
    "--lease",
    default=30.0,
    show_default=True,
    type=click.FloatRange(2.0),
    help="Seconds a job may go without a heartbeat before it is recovered.",
)
@click.option(
    "--grace",
    default=30.0,
    show_default=True,
    type=click.FloatRange(0.0),
    help="Seconds a graceful stop (SIGTERM) waits for running jobs.",
)
@click.option("--burst", is_flag=True, help="Exit once no job is queued, due or running.")
@click.option(
    "--scheduler/--no-scheduler",
    default=True,
    show_default=True,
    help="Also run the periodic tasks' scheduler.",
)
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
@translate_errors
def worker(
    app_path: str,
    queues: str,
    concurrency: int,
    processes: int | None,
    lease: float,
    grace: float,
    burst: bool,
    scheduler: bool,
    log_level: str,
) -> None:
    """Run the jobs of MODULE:APP ($DULY_APP) until SIGTERM/SIGINT, in one process per CPU
    core by default."""
    _configure_logging(log_level)
    queue_list = [q.strip() for q in queues.split(",") if q.strip()]
    if not queue_list:
        fail("--queues needs at least one queue name", 2)
    processes = resolve_processes(processes, burst)
    app = load_app(app_path, None)  # also before a supervisor: a typo fails now, once
    if processes > 1:
        from duly.worker.supervisor import Supervisor

        argv = [
            "worker",
            app_path,
            "--queues",
            ",".join(queue_list),
            "--concurrency",
            str(concurrency),
            "--processes",
            "1",
            "--lease",
            str(lease),
            "--grace",
            str(grace),
            "--log-level",
            log_level,
            "--scheduler" if scheduler else "--no-scheduler",
            *(["--burst"] if burst else []),
        ]
        sys.exit(Supervisor(argv, processes, grace, burst=burst).run())
    runner = app.worker(
        queues=queue_list,
        concurrency=concurrency,
        lease=lease,
        grace=grace,
        burst=burst,
        scheduler=scheduler,
    )
    _use_fast_loop()
    asyncio.run(runner.run())


@click.command()
@click.argument("app_path", envvar="DULY_APP", metavar="MODULE:APP")
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
@translate_errors
def scheduler(app_path: str, log_level: str) -> None:
    """Run only the scheduler of MODULE:APP's periodic tasks (workers run one too)."""
    _configure_logging(log_level)
    app = load_app(app_path, None)
    if not app.schedules:
        fail(f"{app_path} has no periodic tasks", 2)
    from duly.scheduler import Scheduler

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        runner = Scheduler(app)
        logging.getLogger("duly.scheduler").info(
            "scheduler started: %s", ", ".join(sorted(app.schedules))
        )
        try:
            await runner.run(stop)
        finally:
            await app.aclose()

    _use_fast_loop()
    asyncio.run(run())

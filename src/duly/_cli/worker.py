"""``duly worker module:app``."""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import logging
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from typing import Any, TypeVar

import click

from duly._app import App
from duly._cli.common import fail, load_app, translate_errors
from duly._cli.worker_options import WorkerOptions, click_options
from duly._errors import BackendUnavailable
from duly._worker.leases import LeaseShare
from duly._worker.recycling import EXIT_RECYCLED

__all__ = ["default_processes", "resolve_processes", "scheduler", "worker"]

F = TypeVar("F", bound=Callable[..., Any])


def _configure_logging(level: str, log_format: str = "text") -> None:
    if log_format == "json":
        from duly.observability._logs import JsonFormatter

        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        logging.basicConfig(level=level.upper(), handlers=[handler])
        return
    logging.basicConfig(
        level=level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s",
    )


def _add_metrics_hook(app: App) -> None:
    """Count ``app``'s jobs in prometheus_client's default registry (multiprocess files when
    ``$PROMETHEUS_MULTIPROC_DIR`` is set, as the supervisor sets it for its children)."""
    from duly.observability._prometheus import PrometheusHook

    try:
        app.add_hook(PrometheusHook(clock=app.clock))
    except ValueError:  # "Duplicated timeseries": the app already feeds the default registry
        logging.getLogger("duly.worker").info("metrics: the app's own PrometheusHook is served")


def _metrics_children(port: int, host: str) -> tuple[dict[str, str], Callable[[int], None]]:
    """Serve the children's summed metrics on ``host:port`` from a fresh multiprocess
    directory; returns the children's environment and the bookkeeping of a dead child."""
    from duly.observability._prometheus import MULTIPROC_ENV, mark_process_dead, serve_metrics

    path = tempfile.mkdtemp(prefix="duly-metrics-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    serve_metrics(port, host, multiprocess_dir=path)
    env = {k: v for k, v in os.environ.items() if k != "DULY_METRICS_PORT"}
    env[MULTIPROC_ENV] = path
    return env, lambda pid: mark_process_dead(pid, path)


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


def _runner_app_options(fn: F) -> F:
    """MODULE:APP as an argument or ``--app`` ($DULY_APP), and ``--url``."""
    fn = click.option(
        "--url",
        default=None,
        help="Backend URL for an app built as duly.App() (it reads $DULY_URL); an app that "
        "names its own URL keeps it.",
    )(fn)
    fn = click.option(
        "--app",
        "app_option",
        envvar="DULY_APP",
        show_envvar=True,
        default=None,
        metavar="MODULE:APP",
        help="The app, instead of the MODULE:APP argument.",
    )(fn)
    return click.argument("app_path", required=False, metavar="MODULE:APP")(fn)


def _app_path(argument: str | None, option: str | None) -> str:
    """The app named by the argument or ``--app`` ($DULY_APP); exits 2 if none, or two."""
    ctx = click.get_current_context()
    explicit = ctx.get_parameter_source("app_option") == click.core.ParameterSource.COMMANDLINE
    if argument and option and argument != option and explicit:
        fail(f"two apps given: {argument} and --app {option}", 2)
    app_path = argument or option
    if not app_path:
        fail("missing the app: give MODULE:APP (or --app, or $DULY_APP)", 2)
    return app_path


def resolve_processes(processes: int | None, burst: bool) -> int:
    """``--processes`` as given (or ``$DULY_PROCESSES``); else 1 for a burst (a drain-and-exit
    script), else one per CPU core."""
    if processes is not None:
        return processes
    return 1 if burst else default_processes()


@click.command()
@_runner_app_options
@click_options
@translate_errors
def worker(app_path: str | None, app_option: str | None, url: str | None, **values: Any) -> None:
    """Run the jobs of MODULE:APP ($DULY_APP) until SIGTERM/SIGINT, in one process per CPU
    core by default."""
    app_path = _app_path(app_path, app_option)
    options = WorkerOptions.from_params(values)
    _configure_logging(options.log_level, options.log_format.lower())
    queue_list = None  # the app's queues (Worker's default)
    if options.queues is not None:
        queue_list = [q.strip() for q in options.queues.split(",") if q.strip()]
        if not queue_list:
            fail("--queues needs at least one queue name", 2)
    processes = resolve_processes(options.processes, options.burst)
    app = load_app(app_path, url)  # also before a supervisor: a typo fails now, once
    metrics_port = options.metrics_port
    if processes > 1 or (options.recycles and not options.supervised):
        from duly._worker.leases import LeaseKeeper
        from duly._worker.supervisor import Supervisor

        child = options.for_child()
        argv = ["worker", app_path, *(["--url", url] if url else []), *child.argv()]
        env, on_exit = (
            _metrics_children(metrics_port, options.metrics_host) if metrics_port else (None, None)
        )

        def forked(lease_fd: int | None) -> None:
            run = translate_errors(_run_worker)
            run(app, dataclasses.replace(child, lease_fd=lease_fd), queue_list)

        leases = LeaseKeeper(app.backend, app.aclose, app.clock, options.lease)
        supervisor = Supervisor(
            argv,
            processes,
            options.grace,
            burst=options.burst,
            env=env,
            on_exit=on_exit,
            leases=leases,
            # Forked children would inherit prometheus_client's single-process mode (chosen
            # when it is imported) and the metrics server's thread: spawned ones start clean.
            fork=None if metrics_port else forked,
        )
        sys.exit(supervisor.run())
    _run_worker(app, options, queue_list)


def _run_worker(app: App, options: WorkerOptions, queue_list: list[str] | None) -> None:
    """One worker process, in this process: until a signal (or the end of a burst)."""
    metrics_port = options.metrics_port
    if metrics_port is not None or options.metrics_child:
        _add_metrics_hook(app)
    if metrics_port is not None:
        from duly.observability._prometheus import serve_metrics

        serve_metrics(metrics_port, options.metrics_host)
    runner = app.worker(
        queues=queue_list,
        concurrency=options.concurrency,
        lease=options.lease,
        grace=options.grace,
        burst=options.burst,
        scheduler=options.scheduler,
        connect_timeout=options.connect_timeout if options.burst else None,
        lease_share=None if options.lease_fd is None else LeaseShare(options.lease_fd),
        max_jobs=options.max_jobs_per_child,
        max_memory=options.max_memory_per_child,
    )
    _use_fast_loop()

    async def work() -> None:
        # The backend's pools close before the loop does: left open, asyncio.run's teardown
        # cancels their connection tasks mid-connect (psycopg_pool's "error connecting" seen
        # once just before a recycled child that never exited).
        try:
            await runner.run()
        finally:
            await app.aclose()

    try:
        asyncio.run(work())
    except BackendUnavailable as exc:
        fail(f"--burst: {exc}", 2)
    if runner.retired is not None and options.supervised:
        sys.exit(EXIT_RECYCLED)  # the supervisor starts a new process at once


@click.command()
@_runner_app_options
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
@translate_errors
def scheduler(
    app_path: str | None, app_option: str | None, url: str | None, log_level: str
) -> None:
    """Run only the scheduler of MODULE:APP's periodic tasks and stored schedules (workers
    run one too)."""
    app_path = _app_path(app_path, app_option)
    _configure_logging(log_level)
    app = load_app(app_path, url)
    from duly._scheduler import Scheduler

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        runner = Scheduler(app)
        decorated = ", ".join(sorted(app.registry.schedules)) or "none"
        logging.getLogger("duly.scheduler").info(
            "scheduler started: periodic tasks %s, and the stored schedules", decorated
        )
        try:
            await runner.run(stop)
        finally:
            await app.aclose()

    _use_fast_loop()
    asyncio.run(run())

"""``duly worker module:app``."""

from __future__ import annotations

import asyncio
import atexit
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
from duly._errors import BackendUnavailable

__all__ = ["default_processes", "resolve_processes", "scheduler", "worker"]

F = TypeVar("F", bound=Callable[..., Any])

#: How long ``--burst`` retries an unreachable backend before exiting with code 2.
DEFAULT_CONNECT_TIMEOUT = 10.0


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
@click.option(
    "--burst",
    is_flag=True,
    help="Exit once no job is queued, due or running; exit 2 if the backend cannot be "
    "reached within --connect-timeout.",
)
@click.option(
    "--connect-timeout",
    default=DEFAULT_CONNECT_TIMEOUT,
    show_default=True,
    type=click.FloatRange(0.0),
    envvar="DULY_CONNECT_TIMEOUT",
    show_envvar=True,
    help="With --burst: seconds to retry an unreachable backend at start (with backoff) before "
    "exiting with code 2. Without --burst a worker retries forever.",
)
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
@click.option(
    "--log-format",
    default="text",
    show_default=True,
    envvar="DULY_LOG_FORMAT",
    show_envvar=True,
    type=click.Choice(["text", "json"], case_sensitive=False),
    help="json: one object per line (time, level, logger, message, and job_id, task, attempt, "
    "queue, worker on job lines; traceback on errors).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    default=None,
    envvar="DULY_METRICS_PORT",
    show_envvar=True,
    help="Serve Prometheus metrics (duly_jobs_total, duly_job_duration_seconds, ...) at "
    "http://HOST:PORT/metrics; needs duly[metrics]. With --processes > 1 the supervisor "
    "serves the sum of its children (prometheus_client's multiprocess mode, in a temporary "
    "$PROMETHEUS_MULTIPROC_DIR).",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    envvar="DULY_METRICS_HOST",
    show_envvar=True,
    help="Address the metrics are served on (0.0.0.0: every interface).",
)
@click.option("--metrics-child", is_flag=True, hidden=True)  # a supervised child: write metrics
@translate_errors
def worker(
    app_path: str | None,
    app_option: str | None,
    url: str | None,
    queues: str,
    concurrency: int,
    processes: int | None,
    lease: float,
    grace: float,
    burst: bool,
    connect_timeout: float,
    scheduler: bool,
    log_level: str,
    log_format: str,
    metrics_port: int | None,
    metrics_host: str,
    metrics_child: bool,
) -> None:
    """Run the jobs of MODULE:APP ($DULY_APP) until SIGTERM/SIGINT, in one process per CPU
    core by default."""
    app_path = _app_path(app_path, app_option)
    _configure_logging(log_level, log_format.lower())
    queue_list = [q.strip() for q in queues.split(",") if q.strip()]
    if not queue_list:
        fail("--queues needs at least one queue name", 2)
    processes = resolve_processes(processes, burst)
    app = load_app(app_path, url)  # also before a supervisor: a typo fails now, once
    if processes > 1:
        from duly._worker.supervisor import Supervisor

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
            "--log-format",
            log_format,
            "--scheduler" if scheduler else "--no-scheduler",
            "--connect-timeout",
            str(connect_timeout),
            *(["--burst"] if burst else []),
            *(["--url", url] if url else []),
            *(["--metrics-child"] if metrics_port is not None else []),
        ]
        env, on_exit = (
            _metrics_children(metrics_port, metrics_host) if metrics_port else (None, None)
        )
        sys.exit(Supervisor(argv, processes, grace, burst=burst, env=env, on_exit=on_exit).run())
    if metrics_port is not None or metrics_child:
        _add_metrics_hook(app)
    if metrics_port is not None:
        from duly.observability._prometheus import serve_metrics

        serve_metrics(metrics_port, metrics_host)
    runner = app.worker(
        queues=queue_list,
        concurrency=concurrency,
        lease=lease,
        grace=grace,
        burst=burst,
        scheduler=scheduler,
        connect_timeout=connect_timeout if burst else None,
    )
    _use_fast_loop()
    try:
        asyncio.run(runner.run())
    except BackendUnavailable as exc:
        fail(f"--burst: {exc}", 2)


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
    """Run only the scheduler of MODULE:APP's periodic tasks (workers run one too)."""
    app_path = _app_path(app_path, app_option)
    _configure_logging(log_level)
    app = load_app(app_path, url)
    if not app.schedules:
        fail(f"{app_path} has no periodic tasks", 2)
    from duly._scheduler import Scheduler

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

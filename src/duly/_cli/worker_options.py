"""The options of ``duly worker``, declared once.

``WorkerOptions`` holds every option beyond the app and ``--url``; each field's metadata is its
click declaration. ``click_options`` generates the command's options from the fields, and
``WorkerOptions.argv`` the command line of a supervised child from the values, so an option is
written in one place and a child always gets every option its parent was given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click

from duly._worker.settings import ASYNC_CONCURRENCY, SYNC_CONCURRENCY

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "WorkerOptions", "click_options"]

F = TypeVar("F", bound=Callable[..., Any])

#: How long ``--burst`` retries an unreachable backend before exiting with code 2.
DEFAULT_CONNECT_TIMEOUT = 10.0

_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"]


def _option(default: Any, *decls: str, **click_kwargs: Any) -> Any:
    """A field whose click option is ``click.option(*decls, **click_kwargs)``."""
    return dataclasses.field(default=default, metadata={"decls": decls, "click": click_kwargs})


@dataclasses.dataclass(frozen=True, slots=True)
class WorkerOptions:
    """``duly worker``'s options (the first declaration of each is its long name)."""

    queues: str | None = _option(
        None,
        "--queues",
        "-q",
        show_default="every queue the app's tasks declare, 'default' first",
        help="Comma-separated queues, tried in order (earlier first); 'a:3,b:1' weighs them "
        "instead (each claim tries them in a random order drawn by weight: no queue starves).",
    )
    concurrency: int | None = _option(
        None,
        "--concurrency",
        "-c",
        show_default=f"{ASYNC_CONCURRENCY} when every task of the app is async, else "
        f"{SYNC_CONCURRENCY}",
        type=click.IntRange(1, 10_000),
        help="Jobs run at once per process (sync ones each on a thread of their own).",
    )
    processes: int | None = _option(
        None,
        "--processes",
        "-p",
        type=click.IntRange(1, 256),
        envvar="DULY_PROCESSES",
        show_envvar=True,
        show_default="one per CPU core",
        help="Worker processes; with more than one, a supervisor restarts dead ones. "
        "With --burst the default is 1.",
    )
    lease: float = _option(
        30.0,
        "--lease",
        show_default=True,
        type=click.FloatRange(2.0),
        help="Seconds a job may go without a heartbeat before it is recovered.",
    )
    grace: float = _option(
        30.0,
        "--grace",
        show_default=True,
        type=click.FloatRange(0.0),
        help="Seconds a graceful stop (SIGTERM) waits for running jobs.",
    )
    burst: bool = _option(
        False,
        "--burst",
        is_flag=True,
        help="Exit once no job is queued, due or running; exit 2 if the backend cannot be "
        "reached within --connect-timeout.",
    )
    connect_timeout: float = _option(
        DEFAULT_CONNECT_TIMEOUT,
        "--connect-timeout",
        show_default=True,
        type=click.FloatRange(0.0),
        envvar="DULY_CONNECT_TIMEOUT",
        show_envvar=True,
        help="With --burst: seconds to retry an unreachable backend at start (with backoff) "
        "before exiting with code 2. Without --burst a worker retries forever.",
    )
    max_jobs_per_child: int | None = _option(
        None,
        "--max-jobs-per-child",
        type=click.IntRange(1),
        envvar="DULY_MAX_JOBS_PER_CHILD",
        show_envvar=True,
        help="Recycle a worker process after it started N jobs: it stops claiming, finishes "
        "what it runs (within --grace) and exits, and its supervisor starts a new one at once "
        "(nothing is lost or recovered). Runs a supervisor even with one process.",
    )
    max_memory_per_child: int | None = _option(
        None,
        "--max-memory-per-child",
        type=click.IntRange(1),
        envvar="DULY_MAX_MEMORY_PER_CHILD",
        show_envvar=True,
        metavar="MB",
        help="Recycle a worker process once its resident memory is above MB (checked every "
        "second), as --max-jobs-per-child does.",
    )
    scheduler: bool = _option(
        True,
        "--scheduler/--no-scheduler",
        show_default=True,
        help="Also run the periodic tasks' scheduler.",
    )
    log_level: str = _option(
        "INFO",
        "--log-level",
        show_default=True,
        type=click.Choice(_LEVELS, case_sensitive=False),
    )
    log_format: str = _option(
        "text",
        "--log-format",
        show_default=True,
        envvar="DULY_LOG_FORMAT",
        show_envvar=True,
        type=click.Choice(["text", "json"], case_sensitive=False),
        help="json: one object per line (time, level, logger, message, and job_id, task, "
        "attempt, queue, worker on job lines; traceback on errors).",
    )
    metrics_port: int | None = _option(
        None,
        "--metrics-port",
        type=click.IntRange(1, 65535),
        envvar="DULY_METRICS_PORT",
        show_envvar=True,
        help="Serve Prometheus metrics (duly_jobs_total, duly_job_duration_seconds, ...) at "
        "http://HOST:PORT/metrics; needs duly[metrics]. With --processes > 1 the supervisor "
        "serves the sum of its children (prometheus_client's multiprocess mode, in a temporary "
        "$PROMETHEUS_MULTIPROC_DIR).",
    )
    metrics_host: str = _option(
        "127.0.0.1",
        "--metrics-host",
        show_default=True,
        envvar="DULY_METRICS_HOST",
        show_envvar=True,
        help="Address the metrics are served on (0.0.0.0: every interface).",
    )
    #: A supervised child: write metrics for the supervisor to serve.
    metrics_child: bool = _option(False, "--metrics-child", is_flag=True, hidden=True)
    #: A supervised child: the pipe it tells the supervisor its jobs on (``duly._worker.leases``).
    lease_fd: int | None = _option(None, "--lease-fd", type=int, hidden=True)
    #: A supervised child (it never supervises in turn, whatever its other options).
    supervised: bool = _option(False, "--supervised", is_flag=True, hidden=True)

    @property
    def recycles(self) -> bool:
        """Whether worker processes are recycled (after N jobs, or above a memory ceiling)."""
        return self.max_jobs_per_child is not None or self.max_memory_per_child is not None

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> WorkerOptions:
        """The options among click's parsed ``params`` (others, like the app, are ignored)."""
        return cls(**{f.name: params[f.name] for f in dataclasses.fields(cls)})

    def for_child(self) -> WorkerOptions:
        """What a supervised child runs with: one process, metrics written for the
        supervisor (which serves them) rather than served, marked supervised; the supervisor
        adds each child's ``--lease-fd``."""
        return dataclasses.replace(
            self,
            processes=1,
            metrics_port=None,
            metrics_child=self.metrics_port is not None,
            lease_fd=None,
            supervised=True,
        )

    def argv(self) -> list[str]:
        """These options as a command line that parses back to them (unset ones left out)."""
        args: list[str] = []
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            name: str = field.metadata["decls"][0]
            if "/" in name:  # "--on/--off"
                on, off = name.split("/")
                args.append(on if value else off)
            elif isinstance(value, bool):
                args.extend([name] if value else [])
            elif value is not None:
                args.extend([name, str(value)])
        return args


def click_options(fn: F) -> F:
    """Decorate a click command with one option per ``WorkerOptions`` field, in field order;
    each option's parameter is named as its field."""
    for field in reversed(dataclasses.fields(WorkerOptions)):
        decls = field.metadata["decls"]
        fn = click.option(*decls, field.name, default=field.default, **field.metadata["click"])(fn)
    return fn

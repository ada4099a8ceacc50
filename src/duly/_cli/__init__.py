"""The ``duly`` command line: thin wrappers over the library (logic lives in ``duly``)."""

from __future__ import annotations

from duly._cli.bench import bench
from duly._cli.common import cli
from duly._cli.dashboard import dashboard
from duly._cli.demo import demo
from duly._cli.freshness import forget, freshness, refresh
from duly._cli.groups import groups
from duly._cli.inspect import (
    cancel,
    jobs,
    migrate,
    queues,
    retry,
    stats,
    status,
    watches,
    workers,
)
from duly._cli.operate import pause, resume
from duly._cli.schedules import schedules, unschedule
from duly._cli.worker import scheduler, worker

__all__ = ["cli", "main"]

for command in (
    worker,
    scheduler,
    status,
    jobs,
    retry,
    cancel,
    stats,
    queues,
    pause,
    resume,
    workers,
    watches,
    freshness,
    refresh,
    forget,
    groups,
    schedules,
    unschedule,
    migrate,
    dashboard,
    demo,
    bench,
):
    cli.add_command(command)


def main() -> None:
    """Entry point of the ``duly`` script."""
    cli.main(prog_name="duly", standalone_mode=True)


if __name__ == "__main__":  # pragma: no cover
    main()

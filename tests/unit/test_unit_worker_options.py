"""``duly worker``'s options are declared once (``WorkerOptions``): the click command is
generated from them and a supervised child's command line from their values."""

from __future__ import annotations

import dataclasses

import click

from duly._cli.worker import worker
from duly._cli.worker_options import WorkerOptions

#: A value other than the default for every option.
EVERY_OPTION_SET = WorkerOptions(
    queues="high:3,low",
    concurrency=7,
    processes=3,
    lease=2.5,
    grace=0.125,
    burst=True,
    connect_timeout=1.0 / 3,
    max_jobs_per_child=10,
    max_memory_per_child=512,
    scheduler=False,
    log_level="DEBUG",
    log_format="json",
    metrics_port=9123,
    metrics_host="127.0.0.2",
    metrics_child=True,
    lease_fd=5,
    supervised=True,
)


def _parse(argv: list[str]) -> WorkerOptions:
    """What ``duly worker`` makes of ``argv`` (nothing is run)."""
    context = worker.make_context("worker", ["mod:app", *argv])
    return WorkerOptions.from_params(context.params)


def test_the_sample_sets_every_option() -> None:
    defaults = WorkerOptions()
    unset = [
        f.name
        for f in dataclasses.fields(WorkerOptions)
        if getattr(EVERY_OPTION_SET, f.name) == getattr(defaults, f.name)
    ]
    assert unset == [], "give each new option a non-default value above"


def test_every_option_round_trips_through_the_argv() -> None:
    assert _parse(EVERY_OPTION_SET.argv()) == EVERY_OPTION_SET
    assert _parse(WorkerOptions().argv()) == WorkerOptions()
    assert _parse([]) == WorkerOptions()


def test_a_child_gets_every_option_but_runs_one_process_and_writes_metrics() -> None:
    child = _parse(EVERY_OPTION_SET.for_child().argv())
    expected = dataclasses.replace(
        EVERY_OPTION_SET, processes=1, metrics_port=None, metrics_child=True, lease_fd=None
    )
    assert child == expected
    plain = _parse(WorkerOptions(processes=4).for_child().argv())
    assert (plain.processes, plain.metrics_port, plain.metrics_child) == (1, None, False)
    assert plain.supervised and not WorkerOptions(processes=4).supervised


def test_every_field_is_an_option_of_the_command() -> None:
    names = {p.name for p in worker.params if isinstance(p, click.Option)}
    assert {f.name for f in dataclasses.fields(WorkerOptions)} <= names

"""``duly bench``: duly alone on your backend (the logic is ``duly._benchmark``)."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from duly._benchmark import run_benchmark
from duly._cli.common import echo_json, translate_errors

__all__ = ["bench"]


@click.command()
@click.option(
    "--url",
    envvar="DULY_URL",
    show_envvar=True,
    required=True,
    help="Backend URL to measure (a namespace of its own is used, then dropped).",
)
@click.option("--jobs", default=20_000, show_default=True, type=click.IntRange(100, 1_000_000))
@click.option("--concurrency", "-c", default=16, show_default=True, type=click.IntRange(1, 10_000))
@click.option(
    "--samples",
    default=200,
    show_default=True,
    type=click.IntRange(10, 100_000),
    help="Latency samples (one job at a time).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@translate_errors
def bench(url: str, jobs: int, concurrency: int, samples: int, as_json: bool) -> None:
    """Measure enqueue, bulk enqueue, drain and idle latency of duly on URL."""
    console = Console(stderr=True)
    result = run_benchmark(
        url,
        jobs=jobs,
        concurrency=concurrency,
        one_call=min(2_000, jobs),
        latency_samples=samples,
        progress=lambda step: console.print(f"[dim]… {step}[/]"),
    )
    if as_json:
        echo_json(result.to_dict())
        return
    table = Table(title=f"duly on {result.url}", box=None)
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("one-call enqueue", f"{result.enqueue_per_s:,.0f} jobs/s")
    table.add_row("bulk enqueue (enqueue_many)", f"{result.bulk_per_s:,.0f} jobs/s")
    table.add_row(
        f"drain, one worker (concurrency {result.concurrency})", f"{result.drain_per_s:,.0f} jobs/s"
    )
    table.add_row("idle enqueue→start p50", f"{result.latency_p50_ms:.2f} ms")
    table.add_row("idle enqueue→start p99", f"{result.latency_p99_ms:.2f} ms")
    Console().print(table)

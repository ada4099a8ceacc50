"""``duly pause | resume``: the operator's queue controls (PRODUCT §15)."""

from __future__ import annotations

import click

from duly._cli.common import app_options, load_app, translate_errors

__all__ = ["pause", "resume"]


@click.command()
@click.argument("queue")
@app_options
@translate_errors
def pause(queue: str, app_path: str | None, url: str | None) -> None:
    """Pause QUEUE: workers start none of its jobs (running ones finish; enqueue still
    stores) until ``duly resume QUEUE``."""
    paused = load_app(app_path, url).pause(queue)
    click.echo(f"paused {queue}" if paused else f"{queue} was paused already")


@click.command()
@click.argument("queue")
@app_options
@translate_errors
def resume(queue: str, app_path: str | None, url: str | None) -> None:
    """Resume QUEUE: workers take its jobs again."""
    resumed = load_app(app_path, url).resume(queue)
    click.echo(f"resumed {queue}" if resumed else f"{queue} was not paused")

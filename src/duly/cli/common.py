"""Shared CLI plumbing: loading the app, options every command takes, one-line errors."""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from duly.app import App
from duly.errors import BackendUnavailable, DulyError

__all__ = ["app_options", "cli", "echo_json", "fail", "load_app", "translate_errors"]

F = TypeVar("F", bound=Callable[..., Any])


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="duly")
def cli() -> None:
    """duly: background jobs that are never lost.

    Every command finds the app from --app module:attr ($DULY_APP) or the backend from --url
    ($DULY_URL, default sqlite:///duly.db).
    """


def fail(message: str, code: int = 1) -> None:
    """Print one line on stderr and exit with ``code``."""
    click.echo(f"duly: {message}", err=True)
    sys.exit(code)


def load_app(app_path: str | None, url: str | None) -> App:
    """The App named ``module:attr`` (cwd importable), or a bare App on ``url``."""
    if not app_path:
        return _closing(App(url))
    module_name, _, attr = app_path.partition(":")
    if not module_name or not attr:
        fail(f"--app must look like module:attr, got {app_path!r}", 2)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        fail(f"cannot import {module_name!r}: {exc}", 2)
    app = getattr(module, attr, None)
    if not isinstance(app, App):
        fail(f"{app_path!r} is not a duly.App (got {type(app).__name__})", 2)
    assert isinstance(app, App)
    if url:
        click.echo("duly: --url ignored: the app given by --app sets its own URL", err=True)
    return _closing(app)


def _closing(app: App) -> App:
    """Close the app's connections when the command ends (also on ``fail``)."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.call_on_close(app.close)
    return app


def translate_errors(fn: F) -> F:
    """Turn duly errors into one clear line and an exit code, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BackendUnavailable as exc:
            fail(f"backend unavailable: {exc}", 2)
        except (DulyError, ValueError, TypeError) as exc:
            fail(str(exc), 2)

    return wrapper  # type: ignore[return-value]


def app_options(fn: F) -> F:
    """Add ``--app`` ($DULY_APP) and ``--url`` (else the App reads $DULY_URL) to a command."""
    fn = click.option(
        "--url",
        default=None,
        help="Backend URL (default: $DULY_URL, then sqlite:///duly.db).",
    )(fn)
    fn = click.option(
        "--app",
        "app_path",
        envvar="DULY_APP",
        show_envvar=True,
        default=None,
        help="The app as module:attr.",
    )(fn)
    return fn


def echo_json(value: Any) -> None:
    """Print ``value`` as indented JSON."""
    click.echo(json.dumps(value, indent=2, default=str))

"""Shared CLI plumbing: loading the app, options every command takes, one-line errors."""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import Any, NoReturn, TypeVar
from urllib.parse import urlsplit

import click

from duly._app import App
from duly._errors import BackendUnavailable, DulyError
from duly.backends import backend_from_url, redact_url

__all__ = [
    "LazyGroup",
    "app_options",
    "cli",
    "echo_json",
    "fail",
    "find_or_fail",
    "load_app",
    "missing_database",
    "translate_errors",
    "where",
]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


class LazyGroup(click.Group):
    """A group whose commands are imported on first use: ``duly worker`` does not pay for the
    rich tables, the demo or the dashboard's modules at start-up (``--help`` imports them all).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, str] = {}  # command name -> "module:attribute"

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module, _, attribute = self.lazy[cmd_name].partition(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="duly")
def cli() -> None:
    """duly: background jobs that are never lost.

    \b
    Where the jobs are: --app module:attr ($DULY_APP) and/or --url URL ($DULY_URL, default
    sqlite:///duly.db; with --app, --url is the URL of an app that reads $DULY_URL).
    \b
      worker, scheduler       need the app: MODULE:APP (or --app); --url as above
      status, jobs, retry, cancel, stats, queues, workers, watches, migrate
                              --app and/or --url
      dashboard               --app (its tasks: secret arguments, schedules) and/or --url
      demo, bench             --url only (they bring their own tasks)
    \b
    Errors are one line on stderr: exit 1 for an unknown job or a refused action, exit 2 for a
    bad argument, a bad app or URL, or an unreachable backend.
    """


def fail(message: str, code: int = 1) -> NoReturn:
    """Print one line on stderr and exit with ``code``."""
    click.echo(f"duly: {message}", err=True)
    sys.exit(code)


def load_app(app_path: str | None, url: str | None) -> App:
    """The App named ``module:attr`` (cwd importable), or a bare App on ``url``.

    With both, the module is imported with ``$DULY_URL`` set to ``url``, so an app built as
    ``duly.App()`` uses it; an app that names its own URL keeps it (a note says so).
    """
    if not app_path:
        return _closing(App(url))
    module_name, _, attr = app_path.partition(":")
    if not module_name or not attr:
        fail(f"--app must look like module:attr, got {app_path!r}", 2)
    if url:
        backend_from_url(url)  # a bad --url is the command line's fault, not the module's
    module = _import(module_name, url)
    try:
        app = getattr(module, attr)
    except AttributeError:
        fail(f"module {module_name!r} has no attribute {attr!r}", 2)
    if not isinstance(app, App):
        fail(f"{app_path!r} is not a duly.App (got {type(app).__name__})", 2)
    if url and app.url != url:
        click.echo(
            f"duly: --url ignored: {app_path} sets its own URL ({redact_url(app.url)})", err=True
        )
    return _closing(app)


def _import(module_name: str, url: str | None) -> ModuleType:
    """Import the user's module; on failure print only the user's own frames, then one line."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    previous = os.environ.get("DULY_URL")
    if url:
        os.environ["DULY_URL"] = url
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name + ".").startswith(exc.name + "."):  # the module itself
            fail(f"cannot import {module_name!r}: no module named {exc.name!r}", 2)
        _print_user_frames(exc)
        fail(f"error importing {module_name!r}: {type(exc).__name__}: {exc}", 2)
    except Exception as exc:
        _print_user_frames(exc)
        fail(f"error importing {module_name!r}: {type(exc).__name__}: {exc}", 2)
    finally:
        if previous is None:
            os.environ.pop("DULY_URL", None)
        else:
            os.environ["DULY_URL"] = previous


#: Frames of these files are import machinery, not the user's code.
_MACHINERY = (
    "<frozen importlib",
    os.path.dirname(importlib.__file__),
    os.path.dirname(click.__file__),
    os.path.dirname(os.path.dirname(__file__)),  # duly itself
)


def _print_user_frames(exc: BaseException) -> None:
    """The traceback of ``exc`` restricted to the user's files (nothing if none)."""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith(_MACHINERY)
    ]
    if frames:
        lines = ["Traceback (most recent call last, your code only):\n"]
        lines += traceback.format_list(frames)
        click.echo("".join(lines).rstrip("\n"), err=True)


def where(app: App) -> str:
    """The app's backend URL, printable (no password)."""
    return redact_url(app.url)


def missing_database(app: App) -> str | None:
    """For a SQLite app whose file does not exist yet: that path (absolute). Read-only
    commands answer "nothing there" instead of creating the file to look. (A missing
    directory is not "no jobs yet" but a wrong path: the backend reports it unavailable.)"""
    if urlsplit(app.url).scheme.lower() != "sqlite":
        return None
    from duly.backends.sqlite import path_from_url  # a Redis or PostgreSQL CLI never loads it

    path = path_from_url(app.url)
    if path == ":memory:" or path.startswith("file:") or os.path.exists(path):
        return None
    path = os.path.abspath(path)
    return path if os.path.isdir(os.path.dirname(path)) else None


def find_or_fail(app: App, what: str, ident: str, lookup: Callable[[str], T | None]) -> T:
    """``lookup(ident)``, or exit 1 with one line naming where the ``what`` was looked for
    (without creating a SQLite file to look in)."""
    missing = missing_database(app)
    if missing is not None:
        fail(f"no {what} {ident} in {where(app)} ({missing} does not exist)")
    found = lookup(ident)
    if found is None:
        fail(f"no {what} {ident} in {where(app)} (unknown, or removed by retention)")
    return found


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

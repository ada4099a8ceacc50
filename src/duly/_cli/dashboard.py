"""``duly dashboard [--host 127.0.0.1] [--port 8000]``: the HTTP API and dashboard with uvicorn.

Tokens come from ``DULY_READ_TOKENS`` / ``DULY_ADMIN_TOKENS`` (comma-separated). With none,
an admin token is generated for this run and the URL that logs in with it is printed (the
only place a token is ever printed).
"""

from __future__ import annotations

import os
import secrets
from urllib.parse import quote

import click

from duly._app import App
from duly._cli.common import app_options, fail, load_app, translate_errors

__all__ = ["dashboard", "tokens_from_env"]


def tokens_from_env(name: str) -> list[str]:
    """The comma-separated tokens of environment variable ``name`` (blanks dropped)."""
    return [t.strip() for t in os.environ.get(name, "").split(",") if t.strip()]


def _serve(app: App, host: str, port: int, read: list[str], admin: list[str]) -> None:
    try:
        import uvicorn
    except ImportError:
        fail("duly dashboard needs uvicorn: pip install 'duly[dashboard]'", 2)
    asgi = app.asgi(read_tokens=read, admin_tokens=admin)
    # access_log off: a login URL carries its token in the query string.
    uvicorn.run(asgi, host=host, port=port, access_log=False, log_level="info")


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@app_options
@translate_errors
def dashboard(host: str, port: int, app_path: str | None, url: str | None) -> None:
    """Serve the HTTP API (/api/v1) and the dashboard (/) with uvicorn.

    Tokens: $DULY_READ_TOKENS and $DULY_ADMIN_TOKENS, comma-separated (read tokens may look,
    admin tokens may also retry, cancel and refresh). With neither set, an admin token is made
    up for this run and the login URL is printed. Give --app module:app so that the API knows
    your tasks (secret arguments, periodic tasks, watches, freshness).
    """
    app = load_app(app_path, url)
    read = tokens_from_env("DULY_READ_TOKENS")
    admin = tokens_from_env("DULY_ADMIN_TOKENS")
    if not read and not admin:
        token = secrets.token_urlsafe(24)
        admin = [token]
        shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        click.echo(
            "duly: no DULY_READ_TOKENS / DULY_ADMIN_TOKENS set: made up an admin token for this "
            f"run. Log in at http://{shown}:{port}/login?token={quote(token)}",
            err=True,
        )
    _serve(app, host, port, read, admin)

"""The dashboard's page and the look of the login page (owned by the dashboard; this is the
placeholder it replaces). ``duly.http`` mounts ``routes()`` and calls ``login_page``."""

from __future__ import annotations

from html import escape

from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import BaseRoute, Route

__all__ = ["login_page", "routes"]

_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


async def _index(request: Request) -> HTMLResponse:
    return HTMLResponse(
        "<!doctype html><html><head><meta charset='utf-8'><title>duly</title></head><body>"
        "<h1>duly</h1><p>The JSON API is under <a href='api/v1/openapi.json'>api/v1</a>.</p>"
        "<form method='post' action='logout'><button>Log out</button></form></body></html>",
        headers=_HEADERS,
    )


def routes() -> list[BaseRoute]:
    """The page's routes: ``/`` and its static files."""
    return [Route("/", _index, methods=["GET"])]


def login_page(error: str | None, next_url: str) -> str:
    """The login page's HTML: a form posting ``token`` and ``next`` to ``login``."""
    message = f"<p role='alert'>{escape(error)}</p>" if error else ""
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>duly: log in</title></head>"
        f"<body><h1>duly</h1>{message}<form method='post' action='login'>"
        "<label>Token <input name='token' type='password' autocomplete='current-password' "
        "required></label>"
        f"<input type='hidden' name='next' value='{escape(next_url, quote=True)}'>"
        "<button>Log in</button></form></body></html>"
    )

"""The dashboard page (issue 16): ``/`` and its history routes, its static files, the login page.

The page is public HTML, JavaScript and CSS with no data in it: everything it shows comes from
the JSON API (``api/v1/...``) with the browser's session cookie, so it can show nothing the
caller's token may not read. The files are package data (``duly/http/static/``), hand-written
(no build step, no CDN, no third-party code) and served from memory with:

- ``Content-Security-Policy`` without ``'unsafe-inline'``: scripts and styles only from the
  page's own files, ``connect-src 'self'`` (the API and its event stream), ``frame-ancestors
  'none'``, ``base-uri 'self'``, ``form-action 'self'``;
- ``X-Content-Type-Options: nosniff``, ``X-Frame-Options: DENY``, ``Referrer-Policy:
  same-origin``; HTML is never cached, static files are revalidated by ETag.

The page's ``<base href>`` is the mount point (the ASGI ``root_path``), so every URL in the page
is relative and the dashboard works mounted anywhere (``/``, ``/jobs``, inside Django).
"""

from __future__ import annotations

import hashlib
import html
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Final

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

__all__ = ["PAGES", "SECURITY_HEADERS", "login_page", "routes"]

#: The page's own addresses (history routing): each answers the same HTML, the script shows
#: the page. Anything else is not the dashboard's (a 404 from the router).
PAGES: Final = (
    "/",
    "/queues",
    "/workers",
    "/jobs",
    "/jobs/{id}",
    "/periodic",
    "/watches",
    "/groups",
    "/groups/{id}",
    "/workflows",
    "/workflows/{id}",
    "/freshness",
    "/freshness/{name:path}",
    "/key/{key:path}",
)

CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'none'"
)

SECURITY_HEADERS: Final = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}

_TYPES: Final = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".html": "text/html; charset=utf-8",
}


@dataclass(frozen=True, slots=True)
class _File:
    body: bytes
    media_type: str
    etag: str


@cache
def _files() -> dict[str, _File]:
    """Every static file by its path under ``static/`` (read once from the package)."""
    found: dict[str, _File] = {}
    root = resources.files("duly._http").joinpath("static")

    def walk(folder: Traversable, prefix: str) -> None:
        for entry in folder.iterdir():
            if entry.is_dir():
                walk(entry, f"{prefix}{entry.name}/")
                continue
            suffix = entry.name[entry.name.rfind(".") :]
            if suffix not in _TYPES:
                continue
            body = entry.read_bytes()
            etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
            found[prefix + entry.name] = _File(body, _TYPES[suffix], etag)

    walk(root, "")
    return found


_SLOT: Final = re.compile(r"\{\{([A-Z]+)\}\}")


def _fill(name: str, values: dict[str, str]) -> str:
    """The template ``name`` with each ``{{SLOT}}`` replaced in one pass (a value holding
    ``{{...}}`` stays as it is)."""
    return _SLOT.sub(lambda m: values[m.group(1)], _files()[name].body.decode())


def _base(request: Request) -> str:
    """The mount point as an absolute path ending with ``/`` (the page's ``<base href>``)."""
    root = str(request.scope.get("root_path", "")).rstrip("/")
    return root + "/"


def _page(request: Request) -> Response:
    text = _fill("index.html", {"BASE": html.escape(_base(request), quote=True)})
    return HTMLResponse(text, headers={**SECURITY_HEADERS, "Cache-Control": "no-store"})


def _static(request: Request) -> Response:
    found = _files().get(str(request.path_params["path"]))
    if found is None or found.media_type.startswith("text/html"):
        return Response("not found", 404, headers=SECURITY_HEADERS, media_type="text/plain")
    headers = {**SECURITY_HEADERS, "ETag": found.etag, "Cache-Control": "no-cache"}
    if request.headers.get("if-none-match") == found.etag:
        return Response(status_code=304, headers=headers)
    return Response(found.body, headers=headers, media_type=found.media_type)


async def page(request: Request) -> Response:
    """The dashboard's HTML, at every address of ``PAGES``."""
    return _page(request)


async def static(request: Request) -> Response:
    """A file of ``static/`` (JavaScript, CSS, icon)."""
    return _static(request)


def routes() -> list[BaseRoute]:
    """The dashboard's routes: the page at every address of ``PAGES`` and ``/static/...``.
    Public (no token): they carry no data; the page's API calls are authorised."""
    found: list[BaseRoute] = [Route(path, page, methods=["GET"]) for path in PAGES]
    found.append(Route("/static/{path:path}", static, methods=["GET"]))
    return found


def login_page(error: str | None, next_url: str) -> str:
    """The login page's HTML: a form posting ``token`` and ``next`` to ``login``; ``error``
    (plain text) is shown escaped."""
    box = "" if not error else f'<p class="error-box" role="alert">{html.escape(error)}</p>'
    return _fill("login.html", {"ERROR": box, "NEXT": html.escape(next_url, quote=True)})

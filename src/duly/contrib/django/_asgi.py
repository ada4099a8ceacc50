"""duly's dashboard and HTTP API inside a Django project's ASGI application.

asgi.py::

    from django.core.asgi import get_asgi_application
    from duly.contrib.django import with_dashboard

    application = with_dashboard(get_asgi_application(), path="/jobs")

Requests under ``/jobs/`` go to ``app.asgi()`` of the project's App (the dashboard at
``/jobs/``, its API at ``/jobs/api/v1/...``); everything else goes to Django. The ASGI
lifespan (which Django does not speak) is answered here: at shut-down the App's connections
of the server's event loop are closed.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from duly._errors import ConfigurationError

__all__ = ["with_dashboard"]

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]


def _tokens(given: Iterable[str] | None, variable: str) -> list[str]:
    if given is not None:
        return list(given)
    return [t.strip() for t in os.environ.get(variable, "").split(",") if t.strip()]


def with_dashboard(
    application: ASGIApp,
    path: str = "/jobs",
    *,
    read_tokens: Iterable[str] | None = None,
    admin_tokens: Iterable[str] | None = None,
) -> ASGIApp:
    """``application`` (Django's ASGI app) with duly's dashboard and API mounted at ``path``.

    Tokens default to ``$DULY_READ_TOKENS`` / ``$DULY_ADMIN_TOKENS`` (comma-separated), as for
    ``duly dashboard``; with none, every API call is refused (401). The App is the project's
    (``duly.contrib.django.app``), built at the first request under ``path``."""
    if not path.startswith("/") or path == "/":
        raise ConfigurationError(
            f"path is a URL path under the site's root, like '/jobs', not {path!r}"
        )
    prefix = path.rstrip("/")
    reads = _tokens(read_tokens, "DULY_READ_TOKENS")
    admins = _tokens(admin_tokens, "DULY_ADMIN_TOKENS")
    built: list[ASGIApp] = []

    def dashboard() -> ASGIApp:
        if not built:
            from duly.contrib.django import get_app

            built.append(get_app().asgi(read_tokens=reads, admin_tokens=admins))
        return built[0]

    async def dispatch(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send, built)
            return
        if scope["type"] in ("http", "websocket"):
            root = scope.get("root_path", "")
            full = scope["path"]
            local = full[len(root) :] if root and full.startswith(root) else full
            if local == prefix and scope["type"] == "http":
                query = scope.get("query_string", b"").decode("latin-1")
                target = root + prefix + "/" + (f"?{query}" if query else "")
                await _redirect(send, target)
                return
            if local.startswith(prefix + "/"):
                await dashboard()({**scope, "root_path": root + prefix}, receive, send)
                return
        await application(scope, receive, send)

    return dispatch


async def _lifespan(receive: Any, send: Any, built: list[ASGIApp]) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            if built:
                from duly.contrib.django import get_app

                await get_app().aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _redirect(send: Any, location: str) -> None:
    headers = [(b"location", location.encode("latin-1")), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 307, "headers": headers})
    await send({"type": "http.response.body", "body": b""})

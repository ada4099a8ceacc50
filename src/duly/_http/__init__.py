"""duly's HTTP face: ``app.asgi(read_tokens=, admin_tokens=)`` builds a Starlette app.

The JSON API lives under ``/api/v1`` (PRODUCT §9, ``docs/http.md``), with its OpenAPI schema at
``/api/v1/openapi.json``; ``/hooks/{secret}`` runs webhooks, ``/metrics`` and ``/healthz``
serve operations, ``/login`` and ``/logout`` the browser session, ``/`` the dashboard.
Every route is declared once as an ``Endpoint`` (``duly._http.api``); the router and the schema
are both built from that table. No module state: everything hangs off the built app.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_to_bytes

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from duly._http import bulk, events, jobs, ops, schedules, webhooks, workflows
from duly._http.api import Endpoint, error_response, handler, json_response
from duly._http.auth import Auth
from duly._http.dashboard import routes as dashboard_routes
from duly._http.fanout import Fanout
from duly._http.openapi import openapi
from duly._http.session import session_routes

if TYPE_CHECKING:
    from duly._app import App

__all__ = ["build_asgi", "endpoints"]


def endpoints(keepalive: float = events.KEEPALIVE, fanout: Fanout | None = None) -> list[Endpoint]:
    """Every route of the API, in the order the schema lists them (``fanout``: the event
    streams' shared reader)."""
    return [
        *ops.ENDPOINTS,
        *jobs.ENDPOINTS,
        *bulk.ENDPOINTS,
        *schedules.ENDPOINTS,
        *workflows.ENDPOINTS,
        events.events_endpoint(keepalive, fanout),
        *webhooks.ENDPOINTS,
    ]


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    messages = {404: "no such route", 405: "method not allowed on this route"}
    # exc.headers carries e.g. the 405's Allow: the answer keeps it.
    message = messages.get(exc.status_code, str(exc.detail))
    return error_response(exc.status_code, message, dict(exc.headers or {}))


class _StrictPath:
    """ASGI middleware: a path or query whose %-escapes are not UTF-8 (``/jobs/%ff%fe``) is a
    400. The server would otherwise decode them to U+FFFD, and a route would look up (or
    create, e.g. a freshness scope) a value the client never sent."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not _utf8(scope):
            await error_response(400, "the path or query is not valid UTF-8")(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _utf8(scope: Scope) -> bool:
    raw_path = scope.get("raw_path") or b""
    query = bytes(scope.get("query_string") or b"").replace(b"+", b" ")
    try:
        unquote_to_bytes(bytes(raw_path)).decode()
        unquote_to_bytes(query).decode()
    except UnicodeDecodeError:
        return False
    return True


def build_asgi(
    app: App,
    read_tokens: Iterable[str] | None = None,
    admin_tokens: Iterable[str] | None = None,
    *,
    keepalive: float = events.KEEPALIVE,
) -> Starlette:
    """The Starlette app of ``app`` (see ``App.asgi``)."""
    import duly

    auth = Auth(read_tokens, admin_tokens)
    fanout = Fanout()
    table = endpoints(keepalive, fanout)
    schema = openapi(table, duly.__version__)

    routes: list[BaseRoute] = [
        Route(e.route, handler(e, app, auth), methods=[e.method]) for e in table
    ]
    schema_route = _schema_endpoint(schema)
    routes.append(Route(schema_route.path, handler(schema_route, app, auth), methods=["GET"]))
    routes += session_routes(auth)
    routes += dashboard_routes()

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        yield
        await app.aclose()

    asgi = Starlette(
        routes=routes,
        middleware=[Middleware(_StrictPath)],
        exception_handlers={HTTPException: _http_error},
        lifespan=lifespan,
    )
    asgi.state.event_fanout = fanout  # one event reader per served app (tests look at it)
    return asgi


def _schema_endpoint(schema: dict[str, Any]) -> Endpoint:
    async def openapi_schema(call: Any) -> Response:
        """This document."""
        return json_response(schema)

    return Endpoint("GET", "/api/v1/openapi.json", openapi_schema, None, "OpenAPI schema")

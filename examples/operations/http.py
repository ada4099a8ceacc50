"""Backstroke's HTTP face (seed 003), served by duly's own API.

What Backstroke exposed, and where it is now:

- ``GET /v1/operations/:id`` (an operation's status) -> ``GET /api/v1/jobs/{id}``, and
  Backstroke's own shape at ``GET /v1/operations/{id}`` below (``operation_status``);
- a link's operations, newest first -> ``GET /api/v1/jobs?key=link:456`` (pages: ``before=``);
- the success / error counters -> ``GET /api/v1/stats?minutes=1440``;
- the secret URL GitHub calls on a push -> ``POST /hooks/{secret}`` (``webhook_for``): it
  enqueues the link's sync with the owner's GitHub token, which the API, the dashboard, the CLI
  and the logs show as ``"***"`` (and which ``DULY_SECRET_KEY`` encrypts at rest).

Serve it: ``uvicorn examples.operations.http:web`` with ``DULY_READ_TOKENS`` /
``DULY_ADMIN_TOKENS`` set (comma-separated); run the jobs with
``duly worker examples.operations.app:app``.
"""

from __future__ import annotations

import os
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

import duly
from examples.operations.app import app, status_of, sync_link


def webhook_for(link: dict[str, Any], access_token: str) -> duly.Webhook:
    """A secret URL that syncs ``link`` as its owner; give ``hook.path`` to GitHub."""
    signature = sync_link.options(key=f"link:{link['id']}").s(
        link, "WEBHOOK", access_token=access_token
    )
    return app.create_webhook(signature)


async def operation(request: Request) -> JSONResponse:
    """Backstroke's ``GET /v1/operations/:id`` shape (404 when unknown)."""
    info = await app.get_job_async(request.path_params["id"])
    if info is None:
        return JSONResponse({"error": "no such operation"}, 404)
    return JSONResponse(status_of(info))


def _tokens(name: str) -> list[str]:
    return [t for t in os.environ.get(name, "").split(",") if t]


#: duly's API and dashboard at ``/``; Backstroke's own route beside it.
web = Starlette(
    routes=[
        Route("/v1/operations/{id}", operation),
        Mount(
            "/",
            app=app.asgi(
                read_tokens=_tokens("DULY_READ_TOKENS"), admin_tokens=_tokens("DULY_ADMIN_TOKENS")
            ),
        ),
    ]
)

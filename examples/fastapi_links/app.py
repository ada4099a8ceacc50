"""Backstroke's HTTP side (seed 003) as a FastAPI service on duly.

Backstroke's server enqueues a link operation when a secret webhook URL is called, and answers
"what happened to operation X?" on a status route. Here:

- ``POST /links/{link_id}/hook?secret=...`` enqueues ``sync_link`` from the handler with the
  async twin (``enqueue_async``), keyed by the link; a wrong secret is a 404, as if the URL did
  not exist;
- ``GET /operations/{op_id}`` is the operation's status, result or error (404 if unknown);
- ``GET /links/{link_id}/operations`` is the link's operations, newest first (``key=``);
- ``lifespan(app, worker=...)`` opens the App with the server (and, with ``LINKS_WORKER=1``,
  runs a worker in the same process);
- ``/jobs/`` is duly's dashboard and ``/jobs/api/v1/...`` its HTTP API (``app.asgi()`` mounted:
  log in at ``/jobs/login`` with a token of ``LINKS_ADMIN_TOKENS``, comma-separated).

Run it: ``LINKS_WORKER=1 uvicorn examples.fastapi_links.app:api`` (add DULY_URL for Redis or
PostgreSQL; without LINKS_WORKER, run ``duly worker examples.fastapi_links.app:app``).
"""

from __future__ import annotations

import hmac
import os
from datetime import timedelta
from typing import Any

from fastapi import FastAPI, HTTPException

import duly
from duly.contrib.starlette import lifespan

app = duly.App(os.environ.get("DULY_URL", "sqlite:///links.db"))
SECRET = os.environ.get("LINKS_SECRET", "s3cret")
#: The links Backstroke keeps in sync (its database, in the original).
LINKS: dict[int, dict[str, Any]] = {
    1: {"id": 1, "upstream": "octo/app", "fork": "ann/app"},
    2: {"id": 2, "upstream": None, "fork": "bo/gone"},
}


class UpstreamMissing(Exception):
    """The link's upstream repository does not exist (any more)."""


@app.task(name="links.sync_link", retries=2, retention=timedelta(hours=24))
async def sync_link(link_id: int) -> dict[str, Any]:
    """Compare the link's upstream with its fork; 'open a pull request' when they differ."""
    link = LINKS[link_id]
    if not link["upstream"]:
        raise UpstreamMissing(f"link {link_id}: upstream repository is gone")
    return {"link": link_id, "pull_request": f"{link['fork']}#pr-{link_id}"}


api = FastAPI(title="links", lifespan=lifespan(app, worker=os.environ.get("LINKS_WORKER") == "1"))
ADMIN_TOKENS = [t for t in os.environ.get("LINKS_ADMIN_TOKENS", "").split(",") if t]
api.mount("/jobs", app.asgi(admin_tokens=ADMIN_TOKENS))


@api.post("/links/{link_id}/hook", status_code=202)
async def hook(link_id: int, secret: str) -> dict[str, str]:
    """The webhook: enqueue an operation of the link; its id is the operation id."""
    if link_id not in LINKS or not hmac.compare_digest(secret, SECRET):
        raise HTTPException(404, "no such hook")
    job = await sync_link.options(key=f"link:{link_id}").enqueue_async(link_id)
    return {"operation": job.id}


@api.get("/operations/{op_id}")
async def operation(op_id: str) -> dict[str, Any]:
    """One operation: status, attempts, result or last error."""
    info = await app.get_job_async(op_id)
    if info is None:
        raise HTTPException(404, "no such operation")
    error = info.error and {"type": info.error["type"], "message": info.error["message"]}
    return {"status": info.status, "attempts": info.attempts, "result": info.result, "error": error}


@api.get("/links/{link_id}/operations")
async def link_operations(link_id: int, limit: int = 20) -> list[dict[str, str]]:
    """The link's operations, newest first (read from its index, not a scan)."""
    jobs = await app.jobs_async(key=f"link:{link_id}", limit=min(max(limit, 1), 100))
    return [{"id": j.id, "status": j.status} for j in jobs]

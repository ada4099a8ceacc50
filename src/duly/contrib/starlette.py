"""duly in a Starlette or FastAPI application: a lifespan that opens and closes the App.

    import duly
    from duly.contrib.starlette import lifespan
    from fastapi import FastAPI

    app = duly.App()
    api = FastAPI(lifespan=lifespan(app))

    @api.post("/signups")
    async def signup(email: str) -> dict[str, str]:
        job = await send_welcome.enqueue_async(email)      # the async twins, from handlers
        return {"job": job.id}

At start-up the lifespan opens the App's backend on the server's event loop (an unreachable
backend fails the start-up with ``duly.BackendUnavailable``, not the first request); at
shut-down it closes it. ``lifespan(app, worker=True)`` also runs a worker in the server's
process (small deployments, development): it starts with the server and drains gracefully
when the server stops. Already have a lifespan? Nest ``duly_running(app)`` in it.

The dashboard and HTTP API are a Starlette app too: ``api.mount("/jobs", app.asgi(
read_tokens=[...], admin_tokens=[...]))`` serves them under ``/jobs/`` (docs/dashboard.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from duly._app import App

__all__ = ["duly_running", "lifespan"]


@asynccontextmanager
async def duly_running(
    app: App, *, worker: bool = False, **worker_options: Any
) -> AsyncIterator[None]:
    """Open ``app``'s backend on this event loop for the block, and close it after; with
    ``worker``, run ``app.worker(**worker_options)`` (without signal handlers: the server owns
    them) until the block ends, then stop it gracefully."""
    await app.backend()
    runner: asyncio.Task[None] | None = None
    if worker:
        worker_options.setdefault("install_signal_handlers", False)
        running = app.worker(**worker_options)
        runner = asyncio.create_task(running.run(), name="duly-worker")
    try:
        yield
    finally:
        try:
            if runner is not None:
                running.stop()
                await runner
        finally:
            await app.aclose()


def lifespan(
    app: App, *, worker: bool = False, **worker_options: Any
) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """A lifespan for ``Starlette(lifespan=...)`` / ``FastAPI(lifespan=...)`` that runs
    ``duly_running(app, worker=..., **worker_options)`` for the server's life."""

    def server_lifespan(_server: Any) -> AbstractAsyncContextManager[None]:
        return duly_running(app, worker=worker, **worker_options)

    return server_lifespan

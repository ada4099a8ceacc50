"""``duly.contrib.starlette``: the lifespan opens the App on the server's loop and closes it;
a backend that cannot be reached fails the start-up, not the first request."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

import duly
import duly.testing
from duly.contrib.starlette import duly_running, lifespan


def _server(app: duly.App, task: duly.Task[[int], int], **kwargs: Any) -> Starlette:
    async def enqueue(request: Request) -> JSONResponse:
        job = await task.enqueue_async(int(request.path_params["n"]))
        return JSONResponse({"id": job.id})

    return Starlette(routes=[Route("/{n:int}", enqueue, methods=["POST"])], **kwargs)


def test_lifespan_without_a_worker(tmp_path: Path) -> None:
    app = duly.App(f"sqlite:///{tmp_path}/jobs.db")

    @app.task
    def double(n: int) -> int:
        return 2 * n

    with TestClient(_server(app, double, lifespan=lifespan(app))) as client:
        job_id = client.post("/21").json()["id"]
        assert app.workers() == []
    info = app.get_job(job_id)
    assert info is not None and info.status == "queued"  # no worker ran it
    duly.testing.run_jobs(app, [job_id])
    assert app.get_job(job_id).result == 42  # type: ignore[union-attr]
    app.close()


def test_nested_in_the_servers_own_lifespan(tmp_path: Path) -> None:
    app = duly.App(f"sqlite:///{tmp_path}/jobs.db")
    events: list[str] = []

    @app.task
    def double(n: int) -> int:
        return 2 * n

    @asynccontextmanager
    async def own(_server: Starlette):  # type: ignore[no-untyped-def]
        events.append("start")
        async with duly_running(app, worker=True, poll=0.05, lease=2):
            yield
        events.append("stop")

    with TestClient(_server(app, double, lifespan=own)) as client:
        job_id = client.post("/4").json()["id"]
        assert len(app.workers()) == 1
        deadline = time.monotonic() + 30
        while (info := app.get_job(job_id)) is None or not info.finished:  # the worker runs it
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert info.result == 8
    assert events == ["start", "stop"]
    assert app.workers() == []
    app.close()


def test_an_unreachable_backend_fails_the_start_up() -> None:
    app = duly.App("redis://127.0.0.1:1/0")

    @app.task
    def double(n: int) -> int:
        return 2 * n

    with (
        pytest.raises(duly.BackendUnavailable),
        TestClient(_server(app, double, lifespan=lifespan(app))),
    ):
        pass

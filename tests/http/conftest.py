"""Fixtures of the HTTP tests: ``hub`` runs each test once per backend (ids ``sqlite``,
``redis``, ``postgres``); see ``http_harness.py``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from http_harness import ADMIN, READ, Hub, Served, build_app
from services import BACKENDS, backend_url
from starlette.testclient import TestClient

import duly


async def _drop(app: duly.App) -> None:
    await (await app.backend()).drop()
    await app.aclose()


@pytest.fixture(params=BACKENDS)
def hub(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Hub]:
    """This test's App and client on one backend."""
    kind: str = request.param
    url, namespace = backend_url(kind, tmp_path)
    app, tasks = build_app(url, namespace)
    asgi = app.asgi(read_tokens=[READ], admin_tokens=[ADMIN], keepalive=0.5)
    try:
        with TestClient(asgi) as client:
            yield Hub(app, client, tasks["add"], tasks["boom"], tasks["sync_link"], kind)
    finally:
        app.close()
        asyncio.run(_drop(app))
        app.close()


@pytest.fixture
def served(hub: Hub) -> Iterator[Served]:
    """``hub``'s app served by a real uvicorn (streams need a real server)."""
    server = Served(hub.client.app)
    try:
        yield server
    finally:
        server.stop()

"""Fixtures of the dashboard tests: a real uvicorn serving ``app.asgi()`` and, for the browser
tests, one headless Chromium for the module (Playwright driving the system browser: Debian's
``chromium``; Playwright's own browser download is never used).

Without Chromium the browser tests skip with a message locally and fail under ``CI`` (``.ci/run``
installs it). Each test gets its own browser context (cookies, storage) and its own data on its
backend, as ``tests/app/conftest.py`` does.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from served import (
    ADMIN,
    CHROMIUM_ARGS,
    READ,
    Dash,
    backend_url,
    chromium_path,
    in_thread,
    register_tasks,
    serve,
)
from starlette.applications import Starlette
from starlette.routing import Mount

import duly


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per test module, i.e. one for all the browser tests (skip locally
    / fail in CI without it). Not per session: Playwright's sync API keeps an event loop
    running in the main thread while it is started, and the other test folders' fixtures call
    ``asyncio.run`` there (pytest tears this down before running another module's test)."""
    path = chromium_path()
    if path is None:
        message = "no Chromium found (apt-get install chromium, or set DULY_CHROMIUM)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI must provide it", pytrace=False)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # launch() gives the browser a fresh temporary user-data-dir, removed at close.
        chromium = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


async def _drop(app: duly.App) -> None:
    await (await app.backend()).drop()


@pytest.fixture
def make_dash(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., Dash]]:
    """``make_dash(kind="sqlite", browser=True, setup=None, mount="")``: an App with the test
    tasks (and ``setup(app)``'s), served by uvicorn with a read and an admin token; with
    ``mount``, inside another Starlette app at that path (``Dash.url`` includes it)."""
    stack = ExitStack()
    apps: list[duly.App] = []

    def make(
        kind: str = "sqlite",
        browser: bool = True,
        setup: Callable[[duly.App], None] | None = None,
        mount: str = "",
    ) -> Dash:
        url, namespace = backend_url(kind, tmp_path)
        app = duly.App(url, namespace=namespace)
        apps.append(app)
        register_tasks(app)
        if setup is not None:
            setup(app)
        chromium = request.getfixturevalue("browser") if browser else None
        asgi: Any = app.asgi(read_tokens=[READ], admin_tokens=[ADMIN])
        if mount:
            asgi = Starlette(routes=[Mount(mount, app=asgi)])
        served = stack.enter_context(serve(asgi))
        return Dash(app, served + mount, chromium, stack)

    yield make
    stack.close()
    for app in apps:
        app.close()
        in_thread(lambda app=app: _drop(app), app)
        app.close()


@pytest.fixture
def dash(make_dash: Callable[..., Dash]) -> Dash:
    """A served App on SQLite, with the browser."""
    return make_dash()

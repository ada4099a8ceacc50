"""A duly App served by a real uvicorn on a free loopback port, and a worker, each in a thread
of the test process (the App opens one backend per event loop, so they share its data).

Used by the dashboard's browser tests (``conftest.py``), ``docs/images/screenshots.py`` and
``bench/dashboard_render.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import quote

import duly

__all__ = [
    "ADMIN",
    "CHROMIUM_ARGS",
    "READ",
    "RUNS",
    "Dash",
    "backend_url",
    "chromium_path",
    "in_thread",
    "register_tasks",
    "serve",
    "wait_until",
    "worker_thread",
]

#: Debian's chromium, headless, with nothing that talks to the network by itself.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    """The system Chromium (``DULY_CHROMIUM``, /usr/bin/chromium, or on PATH), or None."""
    for candidate in (os.environ.get("DULY_CHROMIUM"), "/usr/bin/chromium"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser")


def wait_until(check: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


@contextlib.contextmanager
def serve(asgi: Any) -> Iterator[str]:
    """Serve ``asgi`` with uvicorn on 127.0.0.1 (a free port) for the block; its base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(asgi, log_level="warning", lifespan="auto", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 10, "uvicorn to start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextlib.contextmanager
def worker_thread(app: duly.App, **options: Any) -> Iterator[duly.Worker]:
    """Run ``app.worker(**options)`` in a thread for the block, then stop it gracefully."""
    options.setdefault("install_signal_handlers", False)
    options.setdefault("poll", 0.05)
    options.setdefault("grace", 5)
    worker = app.worker(**options)

    async def run() -> None:
        try:
            await worker.run()
        finally:
            await app.aclose()

    thread = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(15)


READ = "read-token-" + "r" * 24
ADMIN = "admin-token-" + "a" * 24

#: How many times each task of ``register_tasks`` ran, by its marker argument.
RUNS: dict[str, int] = {}


def register_tasks(app: duly.App) -> None:
    """The tasks the browser tests enqueue."""

    @app.task(name="t.add")
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(name="t.boom", retries=0)
    def boom(text: str) -> None:
        raise ValueError(text)

    @app.task(name="t.once", retries=0)
    def once(marker: str) -> str:
        RUNS[marker] = RUNS.get(marker, 0) + 1
        if RUNS[marker] == 1:
            raise RuntimeError(f"first run of {marker} fails")
        return f"ran {RUNS[marker]} times"


class Dash:
    """One test's served App: ``url``, the App, and helpers to log a browser in."""

    def __init__(self, app: duly.App, url: str, browser: Any | None, stack: ExitStack) -> None:
        self.app = app
        self.url = url
        self._browser = browser
        self._stack = stack
        self.dialogs: list[str] = []

    def page(self, token: str = ADMIN, path: str = "/") -> Any:
        """A new browser context logged in with ``token``, showing ``path``."""
        assert self._browser is not None, "this test did not ask for the browser"
        context = self._browser.new_context(viewport={"width": 1280, "height": 900})
        self._stack.callback(context.close)
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.goto(f"{self.url}/login?token={quote(token)}&next={quote(path)}")
        return page

    def worker(self, **options: Any) -> duly.Worker:
        """Start a worker in a thread for the rest of the test."""
        return self._stack.enter_context(worker_thread(self.app, **options))

    def run_all(self) -> None:
        """Run every due job to completion (a burst worker), then return."""
        worker = self.app.worker(burst=True, install_signal_handlers=False, poll=0.05)
        in_thread(worker.run, self.app)


def in_thread(run: Callable[[], Coroutine[Any, Any, Any]], app: duly.App) -> None:
    """``asyncio.run(run())`` in a thread of its own, closing ``app``'s backend of that loop
    (Playwright's sync API keeps an event loop in the main thread: no asyncio.run there)."""

    async def main() -> None:
        try:
            await run()
        finally:
            await app.aclose()

    thread = threading.Thread(target=asyncio.run, args=(main(),))
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the thread did not finish within 60 s"


def backend_url(kind: str, tmp_path: Path) -> tuple[str, str]:
    """A URL and namespace of this test's own on backend ``kind`` (``services.backend_url``)."""
    from services import backend_url as of_this_test  # tests/ (not for scripts)

    return of_this_test(kind, tmp_path)

"""A private event loop on a daemon thread, so sync callers can use the async backends.

Sync calls (``task.enqueue``, ``app.get_job``) run their coroutine here. This works the same
from plain scripts, from threads, and from inside a running event loop (where a sync call
blocks only its caller, never deadlocks).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["Portal"]

T = TypeVar("T")


class Portal:
    """Runs coroutines on one background loop, started on first use (and again after fork)."""

    def __init__(self, name: str = "duly-portal") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid() or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                thread = threading.Thread(target=serve, name=self._name, daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the portal loop and return its result (re-raising its error)."""
        loop = self._ensure()
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a sync duly call was made from duly's own portal thread")
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def stop(self, final: Coroutine[Any, Any, Any] | None = None) -> None:
        """Run ``final`` (e.g. closing connections) then stop the loop and its thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None or self._pid != os.getpid():
            if final is not None:
                final.close()
            return
        if final is not None:
            # Closing must not raise; the connections die with the loop anyway.
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(final, loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()

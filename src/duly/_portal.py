"""A private event loop on a daemon thread, so sync callers can use the async backends.

Sync calls (``task.enqueue``, ``app.get_job``) run their coroutine here. This works the same
from plain scripts, from threads, and from inside a running event loop (where a sync call
blocks only its caller, never deadlocks).

A script may end without closing its App. At interpreter exit the portal's loop would then be
dropped with its backends' tasks still pending (psycopg_pool's workers print "Task was
destroyed but it is pending!", redis-py's connections ResourceWarnings). So a portal given an
``at_exit`` (the App's ``close``) runs it at exit, while the loop's thread still runs: atexit
handlers run after the non-daemon threads ended, before the daemon ones are frozen.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["Portal"]

T = TypeVar("T")

#: Portals whose ``at_exit`` runs at interpreter exit (weakly: a dropped App is not kept).
_AT_EXIT: weakref.WeakSet[Portal] = weakref.WeakSet()
_AT_EXIT_LOCK = threading.Lock()
_hooked = False


def _run_at_exit() -> None:
    for portal in list(_AT_EXIT):
        portal.exit()


class Portal:
    """Runs coroutines on one background loop, started on first use (and again after fork).

    ``at_exit``, a bound method (held weakly, and idempotent: it may have run already), is
    called at the exit of the process that made the portal.
    """

    def __init__(
        self, name: str = "duly-portal", *, at_exit: Callable[[], object] | None = None
    ) -> None:
        global _hooked
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._owner = os.getpid()
        self._at_exit: weakref.WeakMethod[Callable[[], object]] | None = None
        if at_exit is not None:
            self._at_exit = weakref.WeakMethod(at_exit)
            with _AT_EXIT_LOCK:
                _AT_EXIT.add(self)
                if not _hooked:  # once, at the first such portal: importing duly hooks nothing
                    atexit.register(_run_at_exit)
                    _hooked = True

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

    def exit(self) -> None:
        """Call ``at_exit`` (at interpreter exit; see the module docstring)."""
        at_exit = None if self._at_exit is None else self._at_exit()
        # A forked child must not close what it inherited: the parent still uses it.
        if at_exit is not None and os.getpid() == self._owner:
            # Nothing must be printed at exit: closing is a courtesy (the process ends anyway).
            with contextlib.suppress(Exception):
                at_exit()

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

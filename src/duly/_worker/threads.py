"""A bounded thread pool for sync tasks whose stuck threads can be written off.

``concurrent.futures.ThreadPoolExecutor`` cannot give a slot back while a thread is stuck in a
job that ran past its timeout, so one hung call would eat capacity forever. Here a timed-out
call's thread is *abandoned*: it is asked to stop (an asynchronous ``JobTimeout`` raised in it,
which interrupts pure-Python code) and a fresh thread takes its place at once; if the old thread
ever returns, it exits instead of taking more work.

Threads start on demand, when a call finds none idle, up to ``size``: a worker that only runs
async tasks starts none, and a worker's start-up does not wait for ``concurrency`` threads.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import queue
import threading
from collections.abc import Callable
from contextvars import Context
from typing import Any

from duly._errors import JobTimeout

__all__ = ["ThreadRunner"]

log = logging.getLogger("duly.worker")

_Item = tuple[Callable[[], Any], Context, asyncio.Future[Any], asyncio.AbstractEventLoop, list[int]]


def _resolve(fut: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)


def _consume(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


class ThreadRunner:
    """Runs sync callables on up to ``size`` threads (started when first needed); a stuck
    one is replaced, never waited for."""

    def __init__(self, size: int, name: str = "duly-sync") -> None:
        self._size = size
        self._name = name
        self._work: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._abandoned: set[int] = set()
        self._threads: list[threading.Thread] = []
        self._count = 0
        #: Threads waiting for work and not yet promised a call.
        self._idle = 0
        #: Threads that serve (started and not written off).
        self._serving = 0

    @property
    def abandoned(self) -> int:
        """Threads written off and still running (stuck in a timed-out job)."""
        with self._lock:
            return sum(1 for t in self._threads if t.ident in self._abandoned and t.is_alive())

    @property
    def started(self) -> int:
        """Threads started so far (written-off ones included)."""
        return self._count

    def _spawn(self) -> None:
        self._count += 1
        self._serving += 1
        thread = threading.Thread(
            target=self._serve, name=f"{self._name}-{self._count}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _serve(self) -> None:
        me = threading.get_ident()
        while True:
            try:
                item = self._work.get()
                if item is None:
                    return
                call, context, fut, loop, running_in = item
                with self._lock:
                    running_in.append(me)
                value: Any = None
                error: BaseException | None = None
                try:
                    value = context.run(call)
                except BaseException as exc:  # a task's SystemExit must not kill the pool
                    error = exc
                with self._lock:
                    running_in.clear()  # finished: too late to write this thread off for it
                    if me not in self._abandoned:
                        # Idle before the result is seen: the call it lets start finds this
                        # thread instead of starting another.
                        self._idle += 1
                if not loop.is_closed():
                    loop.call_soon_threadsafe(_resolve, fut, value, error)
            except BaseException:  # a late async JobTimeout landing between jobs
                log.debug("sync worker thread interrupted between jobs", exc_info=True)
            with self._lock:
                if me in self._abandoned:
                    self._abandoned.discard(me)
                    self._threads = [t for t in self._threads if t.ident != me]
                    return

    async def run(self, call: Callable[[], Any], context: Context, timeout: float | None) -> Any:
        """Run ``call`` in ``context`` on a pool thread; raise JobTimeout after ``timeout``."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        running_in: list[int] = []
        with self._lock:
            if self._idle:
                self._idle -= 1
            elif self._serving < self._size:
                self._spawn()  # it takes this call
        self._work.put((call, context, fut, loop, running_in))
        deadline = None if timeout is None else asyncio.timeout(timeout)
        try:
            if deadline is None:
                return await asyncio.shield(fut)
            async with deadline:
                return await asyncio.shield(fut)
        except TimeoutError:
            if deadline is None or not deadline.expired():
                raise  # the job's own TimeoutError (a socket's, say), not its deadline
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                return fut.result()
            self._write_off(running_in, fut)
            raise JobTimeout(f"timed out after {timeout:g}s (sync job; thread abandoned)") from None
        except asyncio.CancelledError:
            self._write_off(running_in, fut)
            raise

    def _write_off(self, running_in: list[int], fut: asyncio.Future[Any]) -> None:
        """Give the slot back now: replace the thread and ask the stuck one to stop."""
        # Nobody awaits this call any more: consume its late outcome so asyncio does not log
        # "exception was never retrieved".
        fut.add_done_callback(_consume)
        with self._lock:
            if not running_in:
                return  # not started (its result will be ignored) or just finished
            ident = running_in[0]
            if ident in self._abandoned:
                return
            self._abandoned.add(ident)
            self._serving -= 1  # the next call that finds no idle thread starts one
            # Raised at the thread's next Python bytecode; a thread blocked in C stays stuck,
            # but it no longer holds a slot.
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(ident), ctypes.py_object(JobTimeout)
            )

    def shutdown(self) -> None:
        """Let idle threads exit; stuck ones are daemons and die with the process."""
        for _ in range(len(self._threads)):
            self._work.put(None)

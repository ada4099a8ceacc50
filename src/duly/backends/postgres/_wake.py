"""Wake-ups on PostgreSQL: LISTEN on one dedicated connection, outside the pool.

Every change that may make a job claimable runs ``pg_notify('duly_<schema>', queue)`` in its
transaction; the reader task wakes the waiters of that queue, or remembers the queue when
nobody waits on it (the next wait for it returns at once).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import psycopg
from psycopg import sql

from duly._errors import BackendUnavailable

__all__ = ["Listener"]


class Listener:
    """The LISTEN side of one backend: one connection (``connect`` opens it, outside the
    pool), one reader task, the waiters it wakes, and the queues notified while nobody
    waited on them."""

    def __init__(
        self, connect: Callable[[], Awaitable[psycopg.AsyncConnection[Any]]], channel: str
    ) -> None:
        self._connect = connect
        self.channel = channel
        self._listener: psycopg.AsyncConnection[Any] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiters: dict[asyncio.Event, frozenset[str]] = {}
        self._missed: set[str] = set()
        self._listen_lock: asyncio.Lock | None = None

    async def wait_for_work(self, queues: Sequence[str], timeout: float) -> None:
        """Return once one of ``queues`` is notified, or after ``timeout`` seconds."""
        wanted = frozenset(queues)
        if self._missed & wanted:
            self._missed -= wanted
            return
        started = await self._start_listener()
        if started is None:  # cannot listen (server down?): the poll interval is the fallback
            await asyncio.sleep(timeout)
            return
        if started:  # notifications sent before LISTEN are lost: let the caller look again
            return
        event = asyncio.Event()
        self._waiters[event] = wanted
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for may swallow a cancellation that
            # comes as the event is set (the waiter would then go on as if never cancelled).
            async with asyncio.timeout(timeout):
                await event.wait()
        except TimeoutError:
            pass
        finally:
            del self._waiters[event]

    async def _start_listener(self) -> bool | None:
        """Make sure the LISTEN connection runs: True if just started, None if it cannot."""
        if self._reader is not None and not self._reader.done():
            return False
        if self._listen_lock is None:
            self._listen_lock = asyncio.Lock()
        async with self._listen_lock:
            if self._reader is not None and not self._reader.done():
                return False
            try:
                conn = await self._connect()
            except BackendUnavailable:
                return None
            try:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
            except psycopg.Error:
                await conn.close()
                return None
            self._listener = conn
            self._reader = asyncio.create_task(self._read_notifies(conn))
            return True

    async def _read_notifies(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Wake the waiters of each notified queue until the connection ends."""
        try:
            async for notify in conn.notifies():
                queue = notify.payload
                woken = False
                for event, wanted in self._waiters.items():
                    if queue in wanted:
                        event.set()
                        woken = True
                if not woken:
                    self._missed.add(queue)
        except psycopg.Error:
            pass  # connection lost: waiters wake below, the next wait reconnects
        finally:
            for event in self._waiters:
                event.set()
            if self._listener is conn:
                self._listener = None
            await conn.close()

    async def stop(self) -> None:
        """Stop the reader and close the LISTEN connection (the next wait starts them again)."""
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, psycopg.Error):
                await reader
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.close()

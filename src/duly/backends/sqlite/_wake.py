"""Waking idle workers of SqliteBackend (``wait_for_work``): what changed since the last claim.

No server notifies us: a ``ChangeWatcher`` thread polls ``PRAGMA data_version`` (commits of
other connections), and the backend counts its own changes that made jobs claimable
(``note_local_change``). A wait returns once either moved past what the last claim saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Awaitable, Callable

from duly.backends.sqlite._connection import POLL_INTERVAL, QUERIES, SqliteConnection

__all__ = ["ChangeWatcher", "WorkSignal", "data_version", "wait_for_work"]


async def wait_for_work(db: SqliteConnection, signal: WorkSignal, timeout: float) -> None:
    """``Backend.wait_for_work``: return once another connection committed since the last
    claim began, or this instance made jobs claimable, or after ``timeout``.

    A watcher thread polls ``PRAGMA data_version`` every ``POLL_INTERVAL`` (no server to
    notify us); the event loop just sleeps on a future. Queues are not told apart and any
    commit counts, so a wake-up may be spurious; each change wakes one wait, not every later
    one, so waiting again without claiming does not spin.
    """
    deadline = asyncio.get_running_loop().time() + max(timeout, 0.0)
    await db.open()  # the watcher must never be the one creating the file

    async def version() -> int:
        return await db.run(data_version, "wait_for_work")

    await signal.wait(deadline, version)


def data_version(conn: sqlite3.Connection) -> int:
    """The database's ``PRAGMA data_version`` (what ``WorkSignal.wait`` compares)."""
    value: int = conn.execute(QUERIES["data_version"]).fetchone()[0]
    return value


class WorkSignal:
    """One backend's change counters and waiters (used only on its event loop)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.watcher: ChangeWatcher | None = None
        # What had changed when the last claim started (see wait).
        self.claim_generation: int | None = None
        self.claim_version: int | None = None
        self.local_changes = 0
        self.claim_local_changes = 0
        self.waiters: set[asyncio.Future[None]] = set()

    def claim_began(self) -> tuple[int, int | None]:
        """What has changed as a claim begins (pass it to ``claim_ended``)."""
        return self.local_changes, None if self.watcher is None else self.watcher.generation

    def claim_ended(self, began: tuple[int, int | None], version: int) -> None:
        """A claim that began at ``began`` ran at the database's ``data_version``."""
        self.claim_local_changes, self.claim_generation = began
        self.claim_version = version

    def note_local_change(self) -> None:
        """This instance made jobs claimable: wake its own waiters at once."""
        self.local_changes += 1
        for future in self.waiters:
            if not future.done():
                future.set_result(None)

    def stop(self) -> None:
        """Stop the watcher thread (a later wait starts a new one)."""
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher, self.claim_generation = None, None

    async def wait(self, deadline: float, data_version: Callable[[], Awaitable[int]]) -> None:
        """Return once another connection committed since the last claim began, or this
        instance made jobs claimable, or at ``deadline`` (event loop time). ``data_version``
        reads the database's version on the backend's connection; the file must exist already
        (the watcher must never be the one creating it).

        Any commit counts, so a wake-up may be spurious; each change wakes one wait, not every
        later one, so waiting again without claiming does not spin.
        """
        loop = asyncio.get_running_loop()
        watcher = self.watcher
        if watcher is None:
            watcher = self.watcher = ChangeWatcher(self.path)
            await loop.run_in_executor(None, watcher.start)
        baseline, local = self.claim_generation, self.claim_local_changes
        if baseline is None:  # the last claim (if any) predates the watcher: ask the writer
            baseline = watcher.generation
            if self.claim_version is not None:
                version = await data_version()
                if version != self.claim_version:
                    baseline = -1
        while self.local_changes == local and watcher.generation == baseline:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            future: asyncio.Future[None] = loop.create_future()
            self.waiters.add(future)
            watcher.listen(loop, future)
            try:
                if self.local_changes == local and watcher.generation == baseline:
                    await asyncio.wait({future}, timeout=remaining)
            finally:
                self.waiters.discard(future)
                watcher.unlisten(loop, future)
        # Consume what woke us: the next wait (without a claim) waits for something newer.
        self.claim_generation, self.claim_version = watcher.generation, None
        self.claim_local_changes = self.local_changes


class ChangeWatcher:
    """A thread that polls ``PRAGMA data_version`` on its own connection.

    ``data_version`` changes when another connection (any process, or this process's writer)
    commits; each change bumps ``generation`` and wakes the registered futures. The event loop
    only sleeps on a future, so an idle worker costs one cheap query per ``POLL_INTERVAL``.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.generation = 0
        self._lock = threading.Lock()
        self._listeners: set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = set()
        self._stop = threading.Event()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="duly-sqlite-watch", daemon=True)

    def start(self) -> None:
        """Start polling; returns once the first version is read (or the read failed)."""
        self._thread.start()
        self._started.wait(5)

    def stop(self) -> None:
        self._stop.set()

    def listen(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[None]) -> None:
        with self._lock:
            self._listeners.add((loop, future))

    def unlisten(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[None]) -> None:
        with self._lock:
            self._listeners.discard((loop, future))

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        last: int | None = None
        try:
            while not self._stop.is_set():
                try:
                    if conn is None:
                        conn = sqlite3.connect(self.path, timeout=1.0, isolation_level=None)
                    version = conn.execute("PRAGMA data_version").fetchone()[0]
                except sqlite3.Error:  # the writer reports outages; keep trying quietly
                    version = None
                if version is not None and last is not None and version != last:
                    self._changed()
                last = version if version is not None else last
                self._started.set()
                self._stop.wait(POLL_INTERVAL)
        finally:
            self._started.set()
            if conn is not None:
                conn.close()

    def _changed(self) -> None:
        with self._lock:
            self.generation += 1
            listeners = list(self._listeners)
        for loop, future in listeners:
            with contextlib.suppress(RuntimeError):  # that loop is closed
                loop.call_soon_threadsafe(_resolve, future)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)

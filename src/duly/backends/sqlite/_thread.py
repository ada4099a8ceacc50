"""The SQLite backend's own thread: it owns the connection and runs what the event loop hands it.

Calls run in the order they were submitted. A *write* call runs inside a ``BEGIN IMMEDIATE``
transaction; write calls found queued together share one transaction (group commit): a worker's
finish and its next claim usually arrive together, and one commit instead of two writes the
pages they both touch once. Each call still sees the effects of the calls before it, exactly as
if they had committed one by one. Should one of them raise (or the commit fail), the shared
transaction is rolled back and each call of the group runs again in its own transaction, so a
call's error never undoes another call's work. A result is handed back only once its
transaction committed.

Why not ``loop.run_in_executor``: under load the event loop's thread holds the GIL most of the
time, and every hop costs GIL hand-offs. Here the results of everything run in one pass go back
in one ``call_soon_threadsafe``.

Every so many commits the thread kicks its ``Checkpointer``, a second thread that copies the WAL
into the database file beside the writer (see there). This module knows nothing of the
database's schema or URLs (``_connection`` opens the connections it is given).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Final

__all__ = [
    "CHECKPOINT_EVERY",
    "CHECKPOINT_ROWS",
    "TRUNCATE_WAIT_MS",
    "WAL_TRUNCATE_FRAMES",
    "Checkpointer",
    "SqliteThread",
    "checkpoint",
    "timed",
    "waited",
]

Opener = Callable[[], sqlite3.Connection]

#: The backend's thread asks its Checkpointer for a checkpoint every this many commits, or
#: sooner once its commits changed CHECKPOINT_ROWS rows: about as often as SQLite's default of a
#: checkpoint per 1000 WAL pages would (a claim or finish of 16 jobs writes 5 to 10 pages).
CHECKPOINT_EVERY: Final = 100
CHECKPOINT_ROWS: Final = 2000
#: WAL frames (pages) past which the Checkpointer empties the WAL file (``checkpoint``):
#: twice the backend's own autocheckpoint (``_connection.WAL_AUTOCHECKPOINT``), ~32 MB.
WAL_TRUNCATE_FRAMES: Final = 8000
#: How long that TRUNCATE waits for readers (and so holds new writers back) before it gives up.
TRUNCATE_WAIT_MS: Final = 50


@contextlib.contextmanager
def timed() -> Iterator[None]:
    """Note on a ``sqlite3.Error`` raised inside how long the block ran before it (for
    ``waited``: how long a locked statement waited); an inner note wins."""
    start = time.monotonic()
    try:
        yield
    except sqlite3.Error as exc:
        exc.__dict__.setdefault(_WAITED, time.monotonic() - start)
        raise


def waited(exc: sqlite3.Error) -> float | None:
    """How long the block that raised ``exc`` ran, if ``timed`` noted it."""
    value: float | None = exc.__dict__.get(_WAITED)
    return value


_WAITED: Final = "duly_waited"


class _Call:
    __slots__ = ("fn", "future", "loop", "write")

    def __init__(
        self,
        fn: Callable[[sqlite3.Connection], Any] | None,
        write: bool,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
    ) -> None:
        self.fn = fn  # None: the closing call (see close)
        self.write = write
        self.loop = loop
        self.future = future


_STOP: Final = None
#: A call's outcome: (call, result, exception).
_Done = tuple[_Call, Any, BaseException | None]


class SqliteThread:
    """One thread and its connection, opened on the thread by ``open_connection()`` at first
    use (and again at the next call after a failed open)."""

    def __init__(
        self,
        open_connection: Opener,
        checkpointer: Checkpointer | None = None,
        name: str = "duly-sqlite",
    ) -> None:
        self._open_connection = open_connection
        self._conn: sqlite3.Connection | None = None
        self._checkpointer = checkpointer
        self._commits = 0  # in all
        self._since_kick = 0  # commits since the checkpointer was last kicked
        self._changes_at_kick = 0  # the connection's total_changes then
        self._queue: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(
        self, fn: Callable[[sqlite3.Connection], Any], *, write: bool
    ) -> asyncio.Future[Any]:
        """Run ``fn(connection)`` on the thread (in a write transaction if ``write``); a future
        of the running loop. Raises RuntimeError once the thread is closed."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the SQLite thread is closed")
            self._queue.put(_Call(fn, write, loop, future))
        return future

    def close(self) -> asyncio.Future[Any]:
        """Refuse new calls; run the queued ones, close the connection and stop. A future of the
        running loop, done then."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the SQLite thread is closed")
            self._closed = True
            self._queue.put(_Call(None, False, loop, future))
            self._queue.put(_STOP)
        return future

    def stop_soon(self) -> None:
        """Stop once the queued calls ran (for an instance dropped without close)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._queue.put(_STOP)

    # -- on the thread ---------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._open_connection()
        return self._conn

    def _run(self) -> None:
        while True:
            calls = [self._queue.get()]
            with contextlib.suppress(queue.Empty):
                while True:
                    calls.append(self._queue.get_nowait())
            done: list[_Done] = []
            stop = False
            i = 0
            while i < len(calls):
                call = calls[i]
                if call is _STOP:
                    stop = True
                    break
                if not call.write:
                    done.append(self._one(call))
                    i += 1
                    continue
                j = i + 1
                while j < len(calls) and (nxt := calls[j]) is not None and nxt.write:
                    j += 1
                group = [c for c in calls[i:j] if c is not None and not c.future.cancelled()]
                if group:
                    done.extend(self._group(group))
                i = j
            if stop:
                conn, self._conn = self._conn, None
                if conn is not None:
                    with contextlib.suppress(sqlite3.Error):
                        conn.close()
                if self._checkpointer is not None:
                    self._checkpointer.stop()
            self._deliver(done)
            if stop:
                return

    def _one(self, call: _Call) -> _Done:
        if call.future.cancelled():
            return call, None, None
        try:
            if call.fn is None:
                conn, self._conn = self._conn, None
                if conn is not None:
                    conn.close()
                return call, None, None
            with timed():
                return call, call.fn(self._connection()), None
        except BaseException as exc:  # delivered to the caller
            return call, None, exc

    def _group(self, group: list[_Call]) -> list[_Done]:
        try:
            with timed():
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:  # locked or unopenable: every call of the group fails alike
            return [(call, None, exc) for call in group]
        results = []
        try:
            with timed():
                for call in group:
                    assert call.fn is not None
                    results.append(call.fn(conn))
                conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back
                    conn.execute("ROLLBACK")
            if len(group) == 1:
                return [(group[0], None, exc)]
            # Nothing of the group was kept: each call again, alone, in submission order.
            return [done for call in group for done in self._group([call])]
        self._commits += 1
        self._since_kick += 1
        if self._checkpointer is not None and (
            self._since_kick >= CHECKPOINT_EVERY
            or conn.total_changes - self._changes_at_kick >= CHECKPOINT_ROWS
        ):
            self._checkpointer.kick()
            self._since_kick, self._changes_at_kick = 0, conn.total_changes
        return [(call, result, None) for call, result in zip(group, results, strict=True)]

    @staticmethod
    def _deliver(done: list[_Done]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[_Done]] = {}
        for item in done:
            by_loop.setdefault(item[0].loop, []).append(item)
        for loop, items in by_loop.items():
            with contextlib.suppress(RuntimeError):  # that loop is closed
                loop.call_soon_threadsafe(_resolve, items)


class Checkpointer:
    """A thread that runs ``PRAGMA wal_checkpoint(PASSIVE)`` on its own connection when kicked.

    A checkpoint copies the WAL's pages into the database file and syncs both (the point where
    ``synchronous=NORMAL`` commits become durable against a power cut). SQLite runs it inside
    the commit that grows the WAL past ``wal_autocheckpoint`` pages, so a busy writer stalls for
    the copy and two fsyncs every ~1000 pages. The backend's thread instead kicks this thread
    about as often (``CHECKPOINT_EVERY``, ``CHECKPOINT_ROWS``) and checkpoints itself only past
    ``WAL_AUTOCHECKPOINT`` pages (then mostly copied already): a PASSIVE checkpoint never blocks
    a writer or a reader, and it runs in SQLite's C code, off the GIL, beside the writer.
    Past ``WAL_TRUNCATE_FRAMES`` it also empties the WAL file (``checkpoint``), which readers
    of other processes could otherwise keep growing.
    """

    def __init__(self, open_connection: Opener) -> None:
        self._open_connection = open_connection
        self.checkpoints = 0  # how many ran (for tests)
        self._kicked = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None

    def kick(self) -> None:
        """Checkpoint soon (starts the thread at the first kick)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="duly-sqlite-checkpoint", daemon=True
            )
            self._thread.start()
        self._kicked.set()

    def stop(self) -> None:
        self._stop = True
        self._kicked.set()

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                self._kicked.wait()
                self._kicked.clear()
                if self._stop:
                    return
                try:
                    if conn is None:
                        conn = self._open_connection()
                    checkpoint(conn)
                    self.checkpoints += 1
                except Exception:  # the writer reports outages; its own checkpoints go on
                    if conn is not None:
                        with contextlib.suppress(sqlite3.Error):
                            conn.close()
                    conn = None
        finally:
            if conn is not None:
                conn.close()


def checkpoint(conn: sqlite3.Connection) -> bool:
    """A PASSIVE checkpoint, then a TRUNCATE one when the WAL is past ``WAL_TRUNCATE_FRAMES``;
    True when the WAL file was emptied.

    A WAL only starts over from its beginning when a writer finds it wholly copied and no
    reader on any of its frames: with readers always somewhere (workers of several processes),
    it never does, and the file grows without bound ("checkpoint starvation"; seen at 92 MB in
    ``bench/retention.py``). TRUNCATE waits for the readers to move on to the file, so it runs
    with a short busy timeout: while it waits, new writers wait too, so it gives up after
    ``TRUNCATE_WAIT_MS`` and the next kick tries again.
    """
    [(_, frames, _)] = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    if frames < WAL_TRUNCATE_FRAMES:
        return False
    [(timeout,)] = conn.execute("PRAGMA busy_timeout").fetchall()
    conn.execute(f"PRAGMA busy_timeout = {TRUNCATE_WAIT_MS}")
    try:
        [(busy, _, _)] = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout)}")
    return not busy


def _resolve(items: list[_Done]) -> None:
    for call, result, exc in items:
        future = call.future
        if future.done():  # cancelled meanwhile
            continue
        if exc is None:
            future.set_result(result)
        else:
            future.set_exception(exc)

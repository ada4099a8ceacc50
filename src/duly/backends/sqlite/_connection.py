"""The SQLite backend's connection: URLs, opening a connection, its thread, error mapping.

``SqliteConnection`` is what the facade owns and hands to every seam: the backend's own
connection, opened and used only on its thread (``_thread``), so the event loop never waits on
SQLite, plus one connection per thread for the blocking calls (``enqueue_blocking``). Every
state change runs in one ``BEGIN IMMEDIATE`` transaction (``transaction``, ``write``), which
takes the database's write lock before the first read; the seams' transaction bodies take the
``sqlite3.Connection`` and run inside it. ``QUERIES`` are the named queries of ``queries/*.sql``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Final, TypeVar
from urllib.parse import unquote, urlsplit

from duly._errors import BackendUnavailable, ConfigurationError
from duly.backends._sql import load_query_folder
from duly.backends.sqlite._thread import Checkpointer, SqliteThread, timed, waited

__all__ = [
    "BUSY_TIMEOUT_MS",
    "POLL_INTERVAL",
    "QUERIES",
    "WAL_AUTOCHECKPOINT",
    "SqliteConnection",
    "connect",
    "is_unavailable",
    "path_from_url",
    "statements",
    "unavailable",
    "write",
]

T = TypeVar("T")

QUERIES: Final = load_query_folder("duly.backends.sqlite")

#: How long a statement waits for another process's write lock before giving up.
BUSY_TIMEOUT_MS: Final = 10_000
#: How often a waiting worker asks SQLite whether another connection committed.
POLL_INTERVAL: Final = 0.005
#: WAL pages past which the backend's own connection checkpoints in its commit, should the
#: Checkpointer fall behind (SQLite's default, for every other connection, is 1000).
WAL_AUTOCHECKPOINT: Final = 4000

# Primary result codes that mean "the database cannot be used right now" rather than a bug.
_UNAVAILABLE_CODES: Final = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_PROTOCOL,
        sqlite3.SQLITE_NOTADB,
        sqlite3.SQLITE_CORRUPT,
        sqlite3.SQLITE_PERM,
        sqlite3.SQLITE_AUTH,
        sqlite3.SQLITE_NOLFS,
    }
)
_LOCKED: Final = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


def path_from_url(url: str) -> str:
    """``sqlite:///rel/path.db`` -> ``rel/path.db``; ``sqlite:////abs.db`` -> ``/abs.db``."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "sqlite" or parts.netloc or not parts.path.startswith("/"):
        raise ConfigurationError(
            f"invalid SQLite URL {url!r}: use sqlite:///relative/path.db or "
            "sqlite:////absolute/path.db"
        )
    path = unquote(parts.path[1:])
    if not path:
        raise ConfigurationError(f"invalid SQLite URL {url!r}: no database path")
    return path


def statements(script: str) -> Iterator[str]:
    """Split ``script`` into complete statements (SQLite's tokenizer skips ``;`` in comments)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""
    rest = "\n".join(
        line for line in buffer.splitlines() if line.strip() and not line.strip().startswith("--")
    )
    if rest:
        raise ValueError(f"incomplete SQL statement: {rest[:80]!r}")


def connect(path: str, busy_timeout_ms: int) -> sqlite3.Connection:
    """An autocommit connection in WAL mode with a busy timeout (call on the owning thread)."""
    conn = sqlite3.connect(
        path, timeout=busy_timeout_ms / 1000, isolation_level=None, cached_statements=256
    )
    try:
        with timed():
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            # Only takes on a new file (before its first table): purge then gives freed pages
            # back (_maintenance.vacuum); _migrate converts an older file.
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            mode = _switch_to_wal(conn, busy_timeout_ms)
        if str(mode).lower() not in ("wal", "memory"):
            raise BackendUnavailable(
                f"SQLite database {path!r}: cannot switch to WAL mode (got {mode!r})"
            )
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA temp_store = MEMORY")
        # A dependent cancelled by a trigger cancels its own dependents through the same
        # trigger (migrations/0011_dependencies.sql).
        conn.execute("PRAGMA recursive_triggers = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def _switch_to_wal(conn: sqlite3.Connection, busy_timeout_ms: int) -> object:
    """``PRAGMA journal_mode = WAL``, retried while it is busy, up to the busy timeout.

    On a file still in rollback mode the pragma reads page 1 under a SHARED lock, then upgrades
    to EXCLUSIVE to write the WAL flag. SQLite never calls the busy handler for an upgrade from
    a read (two upgraders would wait on each other), so while another connection - any
    process's - holds a SHARED lock, typically one doing this same first open, the pragma fails
    at once with SQLITE_BUSY. The switch happens once per file and is permanent: once any
    connection made it, the pragma only reads the flag. So retrying (with jittered backoff, so
    that racers fall out of step) ends as soon as one racer won, and a lock held longer than the
    busy timeout still fails like any other statement's.
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    delay = 0.001
    while True:
        try:
            return conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            code = getattr(exc, "sqlite_errorcode", None)
            if code is None or code & 0xFF != sqlite3.SQLITE_BUSY:
                raise
            if time.monotonic() + delay > deadline:
                raise
        time.sleep(delay * random.uniform(0.5, 1.5))
        delay = min(delay * 2, 0.05)


def is_unavailable(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` means the database cannot be used (locked, unopenable, I/O...)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:  # raised by the sqlite3 module itself (closed connection...)
        return isinstance(exc, sqlite3.ProgrammingError | sqlite3.OperationalError)
    return code & 0xFF in _UNAVAILABLE_CODES


def unavailable(
    exc: sqlite3.Error, path: str, doing: str, busy_timeout_ms: int
) -> BackendUnavailable:
    """A BackendUnavailable naming the file, the operation and what went wrong; for a lock,
    how long it waited (when ``timed`` noted it) against the busy timeout."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in _LOCKED:
        name = getattr(exc, "sqlite_errorname", "SQLITE_BUSY")
        how_long = waited(exc)
        timeout = f"busy timeout {busy_timeout_ms / 1000:g} s"
        if how_long is None:
            hint = f"database is locked by another connection ({name}; {timeout})"
        else:
            hint = (
                f"database is locked by another connection ({name}): gave up after "
                f"{how_long:.3g} s waiting for its lock ({timeout})"
            )
    else:
        hint = str(exc)
    return BackendUnavailable(f"SQLite database {path!r} unavailable ({doing}): {hint}")


def write(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``fn`` in one BEGIN IMMEDIATE transaction (the database's write lock)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back
                conn.execute("ROLLBACK")
        raise
    return result


class SqliteConnection:
    """One backend's connections to the file at ``path``: its thread's (opened lazily, on the
    thread) and the blocking calls' (one per calling thread). ``prepare`` runs on each new
    connection before its first use (the migrations)."""

    def __init__(self, path: str, prepare: Callable[[sqlite3.Connection], object]) -> None:
        self.path = path
        self.thread: SqliteThread | None = None
        self._prepare = prepare
        self._open_lock = threading.Lock()
        self._local = threading.local()  # per-thread connections of the blocking calls
        self._thread_connections: list[sqlite3.Connection] = []

    def unavailable(self, exc: sqlite3.Error, doing: str) -> BackendUnavailable:
        """The BackendUnavailable reporting ``exc`` met while ``doing``."""
        return unavailable(exc, self.path, doing, BUSY_TIMEOUT_MS)

    async def open(self) -> None:
        """Start the thread, open its connection there and prepare it (idempotent)."""
        with self._open_lock:
            if self.thread is None:
                opener = _opener(self.path, self._prepare)
                checkpointer = Checkpointer(functools.partial(connect, self.path, BUSY_TIMEOUT_MS))
                self.thread = SqliteThread(opener, checkpointer)
                # A backend dropped without close() lets its thread stop: the thread holds
                # closures over the path only, never this object.
                weakref.finalize(self, self.thread.stop_soon)
            thread = self.thread
        try:
            await thread.submit(_opened, write=False)
        except RuntimeError as exc:  # closed meanwhile
            raise BackendUnavailable(f"SQLite backend for {self.path!r} is closed") from exc
        except sqlite3.Error as exc:
            if is_unavailable(exc):
                raise self.unavailable(exc, "opening") from exc
            raise

    async def close(self) -> None:
        """Close the connection and stop the thread (once the calls queued before ran).
        Idempotent."""
        with self._open_lock:
            thread, self.thread = self.thread, None
        if thread is None:
            return
        with contextlib.suppress(RuntimeError):  # already closing
            await thread.close()

    async def run(
        self, fn: Callable[[sqlite3.Connection], T], doing: str, *, write: bool = False
    ) -> T:
        """Run ``fn(connection)`` on the thread, inside one write transaction if ``write``
        (see ``_thread``); map an unusable database."""
        thread = self.thread
        if thread is None:
            await self.open()
            thread = self.thread
            assert thread is not None
        try:
            future = thread.submit(fn, write=write)
        except RuntimeError as exc:  # thread closed by a concurrent close()
            raise BackendUnavailable(f"SQLite backend for {self.path!r} is closed") from exc
        try:
            result: T = await future
        except sqlite3.Error as exc:
            if is_unavailable(exc):
                raise self.unavailable(exc, doing) from exc
            raise
        return result

    async def transaction(self, fn: Callable[[sqlite3.Connection], T], doing: str) -> T:
        """Run ``fn`` in a BEGIN IMMEDIATE transaction (shared with the other transactions
        queued at the same time, see ``_thread``: ``fn`` must only act through the connection
        it is given, so that it can run again should the shared transaction roll back)."""
        return await self.run(fn, doing, write=True)

    def transaction_blocking(self, fn: Callable[[sqlite3.Connection], T], doing: str) -> T:
        """``transaction`` on the calling thread's own connection (SQLite connections are per
        thread), so a sync caller pays no thread hop."""
        try:
            return write(self._thread_connection(), fn)
        except sqlite3.Error as exc:
            if is_unavailable(exc):
                raise self.unavailable(exc, doing) from exc
            raise

    def _thread_connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            conn = connect(self.path, BUSY_TIMEOUT_MS)
            try:
                self._prepare(conn)
            except BaseException:
                conn.close()
                raise
            self._local.conn, self._local.pid = conn, os.getpid()
            with self._open_lock:
                self._thread_connections.append(conn)
        return conn

    def close_blocking(self) -> None:
        """Close the connections of the blocking calls (every thread's)."""
        with self._open_lock:
            conns, self._thread_connections = self._thread_connections, []
            self._local = threading.local()
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()


def _opened(conn: sqlite3.Connection) -> None:
    """Nothing: the thread opened (and prepared) ``conn`` to pass it here."""


def _opener(
    path: str, prepare: Callable[[sqlite3.Connection], object]
) -> Callable[[], sqlite3.Connection]:
    """Opens a prepared connection to ``path`` for the backend's thread."""

    def open_connection() -> sqlite3.Connection:
        conn = connect(path, BUSY_TIMEOUT_MS)
        try:
            # Its Checkpointer checkpoints (see there); past this many pages, it does.
            conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT}")
            prepare(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    return open_connection

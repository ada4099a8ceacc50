"""SQLite plumbing for SqliteBackend: URLs, connections, error mapping, the change watcher."""

from __future__ import annotations

import asyncio
import contextlib
import random
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Final
from urllib.parse import unquote, urlsplit

from duly._errors import BackendUnavailable, ConfigurationError

__all__ = [
    "BUSY_TIMEOUT_MS",
    "CHECKPOINT_EVERY",
    "CHECKPOINT_ROWS",
    "POLL_INTERVAL",
    "WAL_AUTOCHECKPOINT",
    "ChangeWatcher",
    "Checkpointer",
    "connect",
    "is_unavailable",
    "path_from_url",
    "statements",
    "timed",
    "unavailable",
]

#: How long a statement waits for another process's write lock before giving up.
BUSY_TIMEOUT_MS: Final = 10_000
#: How often a waiting worker asks SQLite whether another connection committed.
POLL_INTERVAL: Final = 0.005
#: The backend's thread asks its Checkpointer for a checkpoint every this many commits, or
#: sooner once its commits changed CHECKPOINT_ROWS rows: about as often as SQLite's default of a
#: checkpoint per 1000 WAL pages would (a claim or finish of 16 jobs writes 5 to 10 pages).
CHECKPOINT_EVERY: Final = 100
CHECKPOINT_ROWS: Final = 2000
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
            mode = _switch_to_wal(conn, busy_timeout_ms)
        if str(mode).lower() not in ("wal", "memory"):
            raise BackendUnavailable(
                f"SQLite database {path!r}: cannot switch to WAL mode (got {mode!r})"
            )
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA temp_store = MEMORY")
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


@contextlib.contextmanager
def timed() -> Iterator[None]:
    """Note on a ``sqlite3.Error`` raised inside how long the block ran before it (for
    ``unavailable``: how long a locked statement waited); an inner note wins."""
    start = time.monotonic()
    try:
        yield
    except sqlite3.Error as exc:
        exc.__dict__.setdefault(_WAITED, time.monotonic() - start)
        raise


_WAITED: Final = "duly_waited"


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
        waited = exc.__dict__.get(_WAITED)
        timeout = f"busy timeout {busy_timeout_ms / 1000:g} s"
        if waited is None:
            hint = f"database is locked by another connection ({name}; {timeout})"
        else:
            hint = (
                f"database is locked by another connection ({name}): gave up after "
                f"{waited:.3g} s waiting for its lock ({timeout})"
            )
    else:
        hint = str(exc)
    return BackendUnavailable(f"SQLite database {path!r} unavailable ({doing}): {hint}")


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


class Checkpointer:
    """A thread that runs ``PRAGMA wal_checkpoint(PASSIVE)`` on its own connection when kicked.

    A checkpoint copies the WAL's pages into the database file and syncs both (the point where
    ``synchronous=NORMAL`` commits become durable against a power cut). SQLite runs it inside
    the commit that grows the WAL past ``wal_autocheckpoint`` pages, so a busy writer stalls for
    the copy and two fsyncs every ~1000 pages. The backend's thread instead kicks this thread
    about as often (``CHECKPOINT_EVERY``, ``CHECKPOINT_ROWS``) and checkpoints itself only past
    ``WAL_AUTOCHECKPOINT`` pages (then mostly copied already): a PASSIVE checkpoint never blocks
    a writer or a reader, and it runs in SQLite's C code, off the GIL, beside the writer.
    """

    def __init__(self, path: str) -> None:
        self.path = path
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
                        conn = connect(self.path, BUSY_TIMEOUT_MS)
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.checkpoints += 1
                except Exception:  # the writer reports outages; its own checkpoints go on
                    if conn is not None:
                        with contextlib.suppress(sqlite3.Error):
                            conn.close()
                    conn = None
        finally:
            if conn is not None:
                conn.close()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)

"""SQLite gives freed pages back (issue 28): new files use incremental auto_vacuum, an older
small file is converted when it opens, and a purge returns the pages its deletions freed."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from duly._ids import new_id
from duly._records import NewJob, Outcome
from duly.backends.sqlite import SqliteBackend, _maintenance, _migrate

NOW = 1_700_000_000.0


def pragma(path: Path, name: str) -> int:
    conn = sqlite3.connect(path)
    try:
        value: int = conn.execute(f"PRAGMA {name}").fetchone()[0]
        return value
    finally:
        conn.close()


def open_and_close(path: Path) -> None:
    async def main() -> None:
        backend = SqliteBackend(f"sqlite:///{path}")
        await backend.open()
        await backend.close()

    asyncio.run(main())


def test_a_new_file_uses_incremental_auto_vacuum(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    open_and_close(path)
    assert pragma(path, "auto_vacuum") == 2  # INCREMENTAL


def test_a_small_older_file_is_converted_when_it_opens(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE leftover (x BLOB)")
    conn.close()
    assert pragma(path, "auto_vacuum") == 0
    open_and_close(path)
    assert pragma(path, "auto_vacuum") == 2
    conn = sqlite3.connect(path)  # the VACUUM kept WAL mode and the data
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT count(*) FROM leftover").fetchone()[0] == 0
    conn.close()


def test_a_big_older_file_is_left_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_migrate, "VACUUM_ON_OPEN_MAX_BYTES", 0)
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE leftover (x BLOB)")
    conn.close()
    open_and_close(path)
    assert pragma(path, "auto_vacuum") == 0  # docs/backends.md says how to convert it


def test_purging_finished_jobs_shrinks_the_file(tmp_path: Path) -> None:
    path = tmp_path / "purge.db"
    payload = b'[["' + b"x" * 1000 + b'"],{}]'
    total = 3000

    async def main() -> tuple[tuple[int, int], tuple[int, int], int]:
        backend = SqliteBackend(f"sqlite:///{path}")
        try:
            jobs = [
                NewJob(new_id(), "t", "default", payload, 1, None, 0, NOW, NOW)
                for _ in range(total)
            ]
            await backend.enqueue(jobs)
            done = 0
            while done < total:
                claimed = await backend.claim("w", ["default"], 500, NOW, NOW + 60)
                outcomes = [
                    Outcome(j.id, "succeeded", result=b"1", expire_at=NOW + 1) for j in claimed
                ]
                await backend.finish("w", outcomes, NOW)
                done += len(claimed)
            full = await backend._db.run(pages, "read")
            purged = 0
            while deleted := await backend.purge(NOW + 2, 1000, keep=0):
                purged += deleted
            after = await backend._db.run(pages, "read")
            return full, after, purged
        finally:
            await backend.close()

    (full, free_full), (after, free_after), purged = asyncio.run(main())
    assert purged == total
    assert free_full < _maintenance.VACUUM_MIN_PAGES
    # the file is as long as its pages (in WAL mode, from the next checkpoint on)
    assert after < full / 10, (full, after)
    assert free_after < _maintenance.VACUUM_MIN_PAGES


def pages(conn: sqlite3.Connection) -> tuple[int, int]:
    [(count,)] = conn.execute("PRAGMA page_count")
    [(free,)] = conn.execute("PRAGMA freelist_count")
    return count, free


def test_a_wal_that_readers_kept_from_starting_over_is_emptied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checkpoint starvation (bench/retention.py: a 92 MB WAL under steady load): while some
    reader always holds a snapshot the WAL never restarts, so the Checkpointer empties it once
    it is past WAL_TRUNCATE_FRAMES and the readers moved on."""
    from duly.backends.sqlite import _thread
    from duly.backends.sqlite._connection import connect

    monkeypatch.setattr(_thread, "WAL_TRUNCATE_FRAMES", 200)
    path = tmp_path / "wal.db"
    writer = connect(str(path), 10_000)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("CREATE TABLE t (x BLOB)")
    reader = connect(str(path), 10_000)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchall()  # an old snapshot pins the WAL
    for _ in range(300):
        writer.execute("INSERT INTO t VALUES (randomblob(3000))")
    wal = Path(f"{path}-wal")
    grown = wal.stat().st_size
    assert grown > 300 * 3000
    reader.execute("COMMIT")

    checkpointer = _thread.Checkpointer(lambda: connect(str(path), 10_000))
    try:
        checkpointer.kick()
        for _ in range(500):
            if checkpointer.checkpoints:
                break
            time.sleep(0.01)
        assert checkpointer.checkpoints == 1
    finally:
        checkpointer.stop()
    assert wal.stat().st_size == 0
    assert writer.execute("SELECT count(*) FROM t").fetchone()[0] == 300
    writer.close()
    reader.close()

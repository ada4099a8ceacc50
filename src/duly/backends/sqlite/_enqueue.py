"""Enqueuing: the enqueue transaction of SqliteBackend (``enqueue`` and ``enqueue_blocking``),
with the unique holds of the batch."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence

from duly._records import EnqueueResult, NewJob
from duly.backends.sqlite import _concurrency
from duly.backends.sqlite._connection import QUERIES, SqliteConnection
from duly.backends.sqlite._wake import WorkSignal

__all__ = ["enqueue", "enqueue_blocking", "enqueue_tx"]


async def enqueue(
    db: SqliteConnection, signal: WorkSignal, jobs: Sequence[NewJob]
) -> list[EnqueueResult]:
    """``Backend.enqueue``: the batch in one transaction; wakes this instance's waiters."""
    if not jobs:
        return []
    results = await db.transaction(enqueue_tx(jobs), "enqueue")
    signal.note_local_change()
    return results


def enqueue_blocking(db: SqliteConnection, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
    """``enqueue`` on the calling thread's own connection (no thread hop for sync callers)."""
    if not jobs:
        return []
    return db.transaction_blocking(enqueue_tx(jobs), "enqueueing")


def enqueue_tx(jobs: Sequence[NewJob]) -> Callable[[sqlite3.Connection], list[EnqueueResult]]:
    """The enqueue transaction's body: store the batch; an id already stored is reported
    deduplicated, a unique key held by an active job reports that job.

    The rows are built here, once, outside the body: the body may run again should the shared
    transaction it joined roll back (see ``_thread``).
    """
    rows = []
    for job in jobs:
        scheduled = job.scheduled_for > job.enqueued_at
        rows.append(
            {
                "id": job.id,
                "task": job.task,
                "queue": job.queue,
                "payload": job.payload,
                "max_attempts": job.max_attempts,
                "key": job.key,
                "priority": job.priority,
                "enqueued_at": job.enqueued_at,
                "scheduled_for": job.scheduled_for,
                "status": "scheduled" if scheduled else "queued",
                "position": job.scheduled_for if scheduled else job.enqueued_at,
                "unique_key": job.unique_key,
                "unique_until": job.unique_until,
                "unique_expires_at": job.unique_expires_at,
                "gate": job.gate,
                "gate_limit": job.gate_limit,
                "expires_at": job.expires_at,
            }
        )
    ids = json.dumps([job.id for job in jobs])
    queues = [{"name": name} for name in sorted({job.queue for job in jobs})]

    def enqueue(conn: sqlite3.Connection) -> list[EnqueueResult]:
        seen = {row[0] for row in conn.execute(QUERIES["existing_ids"], {"ids": ids})}
        results, plain = [], []
        for job, row in zip(jobs, rows, strict=True):
            if job.id in seen:  # an id stored already (or earlier in this batch)
                results.append(EnqueueResult(job.id, deduplicated=True))
                continue
            if job.unique_key is None:
                plain.append(row)  # inserted together below: the hot path stays one batch
            else:
                holder = _concurrency.unique_holder(conn, job.unique_key, job.enqueued_at)
                if holder is not None:
                    if job.debounce:
                        _debounce(conn, holder, row)
                    results.append(EnqueueResult(holder, deduplicated=True))
                    continue
                # At once, so a duplicate later in this batch finds it as the holder.
                conn.execute(QUERIES["insert_job"], row)
            seen.add(job.id)
            results.append(EnqueueResult(job.id))
        conn.executemany(QUERIES["insert_job"], plain)
        conn.executemany(QUERIES["insert_queue"], queues)
        return results

    return enqueue


def _debounce(conn: sqlite3.Connection, holder: str, row: dict[str, object]) -> None:
    """The waiting ``holder`` of a debounced key takes the new job's arguments and due time
    (a running one is left alone); a gated holder that was ready passes its turn on."""
    params = {"id": holder, "payload": row["payload"], "scheduled_for": row["scheduled_for"]}
    [(ready,)] = conn.execute(QUERIES["debounce_ready"], {"id": holder}).fetchall()
    for gate, gate_limit in conn.execute(QUERIES["debounce"], params).fetchall():
        if gate is not None and ready:
            _concurrency.free_gate_slots(conn, {gate: gate_limit})

"""Enqueue on PostgreSQL: the statements of one batch as a plan, run on any connection.

The plan (``enqueue_plan``) is a generator of ``(query, params)`` steps, so the same logic
runs on a pooled async connection (``enqueue``), on the caller's own connection inside its
transaction (``enqueue_on``, ``enqueue_on_async``: see ``_transactional``), on the sync pool of
blocking enqueue (``enqueue_blocking``), and inside the group and freshness transactions.

An enqueue is idempotent (a job id already stored is left alone), so one that met a pooled
connection the server had cut is sent once more on a fresh one, async or blocking.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, TypeVar

import psycopg
from psycopg_pool import PoolTimeout

from duly._errors import BackendUnavailable
from duly._records import EnqueueResult, NewJob
from duly.backends.postgres._connection import NOT_OUTAGES, Connection, Queries, dead_connection
from duly.backends.postgres._migrate import Schema

__all__ = [
    "enqueue",
    "enqueue_blocking",
    "enqueue_on",
    "enqueue_on_async",
    "enqueue_plan",
    "run_plan_async",
]

T = TypeVar("T")

#: Rounds of insert-then-look-up for a unique job whose holder keeps vanishing (see
#: ``enqueue_plan``); each round needs another job to take and lose the key meanwhile.
_UNIQUE_ROUNDS: Final = 10


def _column(values: list[Any], convert: Callable[[Any], Any] | None) -> tuple[list[Any], Any]:
    """One column of a batch as the enqueue statements take it (``a_<column>``,
    ``v_<column>``): ``([], value)`` when every job has the same value, else every job's value
    (through ``convert``, None kept) and None."""
    first = values[0]
    if values.count(first) == len(values):
        return [], first if first is None or convert is None else convert(first)
    if convert is not None:
        values = [None if v is None else convert(v) for v in values]
    return values, None


def _enqueue_params(jobs: Sequence[NewJob], channel: str) -> dict[str, Any]:
    """The parameters of both enqueue statements (``enqueue_fresh``, ``enqueue``).

    A column whose value every job of the batch shares is sent once (see ``_column``): a bulk
    batch of one task costs its ids and payloads, not 15 arrays. The options of a unique key
    or a gate are stored only with it. Values are converted to the column's Python type (one
    array never mixes types). Each job's status, and the queues to register and to wake, are
    computed here (``enqueue_fresh`` stores every row or none).
    """
    params: dict[str, Any] = {"a_id": [j.id for j in jobs], "channel": channel}

    def put(name: str, values: list[Any], convert: Callable[[Any], Any] | None = None) -> bool:
        """Send one column; True when every job has the same value."""
        params[f"a_{name}"], params[f"v_{name}"] = array, _ = _column(values, convert)
        return not array

    def every(name: str) -> list[Any]:
        values: list[Any] = params[f"a_{name}"] or [params[f"v_{name}"]] * len(jobs)
        return values

    # One comprehension per field: faster than a generic getattr loop over 15 fields.
    put("task", [j.task for j in jobs])
    one_queue = put("queue", [j.queue for j in jobs])
    put("payload", [j.payload for j in jobs], bytes)
    put("max_attempts", [j.max_attempts for j in jobs], int)
    put("key", [j.key for j in jobs])
    put("priority", [j.priority for j in jobs], int)
    one_enqueued_at = put("enqueued_at", [j.enqueued_at for j in jobs], float)
    one_scheduled_for = put("scheduled_for", [j.scheduled_for for j in jobs], float)
    # scheduled when due after its enqueue (compared as doubles, as SQL would)
    if one_enqueued_at and one_scheduled_for:
        put(
            "status",
            ["scheduled" if params["v_scheduled_for"] > params["v_enqueued_at"] else "queued"],
        )
    else:
        put(
            "status",
            [
                "scheduled" if due > at else "queued"
                for due, at in zip(every("scheduled_for"), every("enqueued_at"), strict=True)
            ],
        )
    if one_queue and not params["a_status"]:
        params["queues"] = [params["v_queue"]]
        params["wake"] = [params["v_queue"]] if params["v_status"] == "queued" else []
    else:
        queues = every("queue")
        params["queues"] = sorted(set(queues))
        params["wake"] = sorted(
            {q for q, status in zip(queues, every("status"), strict=True) if status == "queued"}
        )
    put("expires_at", [j.expires_at for j in jobs], float)
    if put("gate", [j.gate for j in jobs]) and params["v_gate"] is None:
        put("gate_limit", [None])
    else:
        put("gate_limit", [None if j.gate is None else j.gate_limit for j in jobs], int)
    if put("unique_key", [j.unique_key for j in jobs]) and params["v_unique_key"] is None:
        put("unique_until", [None])
        put("unique_expires_at", [None])
    else:
        put("unique_until", [None if j.unique_key is None else j.unique_until for j in jobs])
        put(
            "unique_expires_at",
            [None if j.unique_key is None else j.unique_expires_at for j in jobs],
            float,
        )
    return params


#: One step of a plan: the name of a query and its parameters. The plan is sent the rows.
_Step = tuple[str, dict[str, object]]
_Plan = Generator[_Step, list[tuple[Any, ...]], T]


def enqueue_plan(
    jobs: Sequence[NewJob], channel: str, *, fresh: bool
) -> _Plan[list[EnqueueResult]]:
    """The statements of one enqueue, for every way of running them (pooled connection, the
    caller's own, blocking): yields ``(query, params)`` and is sent each statement's rows, or
    thrown the ``UniqueViolation`` a statement raised.

    With ``fresh`` (the connection is in autocommit with no transaction open, so a failed
    statement leaves nothing behind), a batch without unique jobs is one ``enqueue_fresh``: a
    plain insert of every job. An id already stored (a resend) makes it fail and store nothing;
    ``enqueue`` then runs, which skips the ids already stored. Otherwise a batch without
    unique jobs is one ``enqueue`` statement. A unique job left out by it (its key is held)
    needs ``unique_holders`` in the same transaction: a later statement, whose snapshot sees
    the holder the insert waited for. A holder gone since (finished, started) or past its
    expiry (taken over) means inserting that job again.
    """
    params = _enqueue_params(jobs, channel)
    if fresh and params["a_unique_key"] == [] and params["v_unique_key"] is None:
        try:
            yield "enqueue_fresh", params
        except psycopg.errors.UniqueViolation:
            pass  # stored nothing: an id is stored already, or twice in the batch
        else:
            return list(map(EnqueueResult, params["a_id"]))
    results: list[EnqueueResult | None] = [None] * len(jobs)
    pending = list(range(len(jobs)))
    for round_ in range(_UNIQUE_ROUNDS):
        if round_:
            params = _enqueue_params([jobs[i] for i in pending], channel)
        [row] = yield "enqueue", params
        inserted = set(row[0])
        held = []
        for i in pending:
            job = jobs[i]
            if job.id in inserted:
                # An id twice in the batch (a caller's own id) is stored once: the first.
                inserted.discard(job.id)
                results[i] = EnqueueResult(job.id)
            elif job.unique_key is None:  # its id is already stored (a resend)
                results[i] = EnqueueResult(job.id, deduplicated=True)
            else:
                held.append(i)
        if not held:
            return [r for r in results if r is not None]
        rows = yield (
            "unique_holders",
            {
                "ids": [jobs[i].id for i in held],
                "unique_keys": [jobs[i].unique_key for i in held],
                "enqueued_at": [float(jobs[i].enqueued_at) for i in held],
            },
        )
        pending = []
        debounced: dict[str, NewJob] = {}  # holder -> the last job of the batch it takes
        for i, (_, stored, holder, expired) in zip(held, rows, strict=True):
            if stored:
                results[i] = EnqueueResult(jobs[i].id, deduplicated=True)
            elif holder is not None and not expired:
                results[i] = EnqueueResult(holder, deduplicated=True)
                if jobs[i].debounce:
                    debounced[holder] = jobs[i]
            else:
                pending.append(i)
        if debounced:
            yield from _debounce(debounced, channel)
        if not pending:
            return [r for r in results if r is not None]
    raise RuntimeError(f"unique enqueue: the holders of {len(pending)} keys kept changing")


def _debounce(holders: dict[str, NewJob], channel: str) -> _Plan[None]:
    """The steps that give the waiting ``holders`` of debounced keys their new job's payload
    and due time; a gated holder that was ready passes its turn on (``gate_unpark``)."""
    rows = yield (
        "debounce",
        {
            "ids": list(holders),
            "payloads": [job.payload for job in holders.values()],
            "due": [float(job.scheduled_for) for job in holders.values()],
        },
    )
    gates = [gate for gate, ready in rows if gate is not None and ready]
    if gates:
        yield "gate_unpark", {"gates": gates, "channel": channel}


def _run_plan(conn: psycopg.Connection[Any], queries: Queries, plan: _Plan[T]) -> T:
    """Run ``plan`` on a sync connection, in whatever transaction it is in."""
    try:
        name, params = next(plan)
        while True:
            try:
                rows = conn.execute(queries[name], params).fetchall()
            except psycopg.errors.UniqueViolation as exc:
                name, params = plan.throw(exc)
            else:
                name, params = plan.send(rows)
    except StopIteration as done:
        result: T = done.value
        return result


async def run_plan_async(conn: psycopg.AsyncConnection[Any], queries: Queries, plan: _Plan[T]) -> T:
    """Run ``plan`` on an async connection, in whatever transaction it is in."""
    try:
        name, params = next(plan)
        while True:
            try:
                cur = await conn.execute(queries[name], params)
                rows = await cur.fetchall()
            except psycopg.errors.UniqueViolation as exc:
                name, params = plan.throw(exc)
            else:
                name, params = plan.send(rows)
    except StopIteration as done:
        result: T = done.value
        return result


def _outside_transaction(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """True when each statement on ``conn`` commits on its own (autocommit, no transaction
    open, no pipeline): one that fails there leaves nothing behind, the connection included."""
    info = conn.info
    return (
        conn.autocommit
        and info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        and info.pipeline_status == psycopg.pq.PipelineStatus.OFF
    )


def _any_unique(jobs: Sequence[NewJob]) -> bool:
    return any(j.unique_key is not None for j in jobs)


async def enqueue(db: Connection, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
    """``Backend.enqueue`` on a pooled connection."""
    if not jobs:
        return []

    async def run(conn: psycopg.AsyncConnection[Any]) -> list[EnqueueResult]:
        plan = enqueue_plan(jobs, db.channel, fresh=_outside_transaction(conn))
        return await run_plan_async(conn, db.q, plan)

    # Idempotent: a job id already stored is left alone, so a resend after a lost answer
    # cannot double a job. Without unique jobs the plan is one statement.
    return await db.transaction(run, retry=True, atomic=_any_unique(jobs))


def enqueue_on(
    db: Connection, schema: Schema, conn: psycopg.Connection[Any], jobs: Sequence[NewJob]
) -> list[EnqueueResult]:
    """Insert ``jobs`` with the caller's connection, inside its current transaction.

    Nothing is committed here: the jobs become visible (and idle workers are woken) when
    the caller commits, and never exist if it rolls back. Needs no opened backend: the
    first call readies the schema on a connection of its own (see ``_migrate``). A batch
    with unique jobs may take more than one statement: run it in a transaction (an
    autocommit connection would commit each one on its own).
    """
    if not jobs:
        return []
    schema.ensure_blocking()
    with _on_callers_connection(db, schema):
        plan = enqueue_plan(jobs, db.channel, fresh=_outside_transaction(conn))
        return _run_plan(conn, db.q, plan)


async def enqueue_on_async(
    db: Connection, schema: Schema, conn: psycopg.AsyncConnection[Any], jobs: Sequence[NewJob]
) -> list[EnqueueResult]:
    """The async twin of :func:`enqueue_on`, for a ``psycopg.AsyncConnection``."""
    if not jobs:
        return []
    await schema.ensure()
    with _on_callers_connection(db, schema):
        plan = enqueue_plan(jobs, db.channel, fresh=_outside_transaction(conn))
        return await run_plan_async(conn, db.q, plan)


@contextmanager
def _on_callers_connection(db: Connection, schema: Schema) -> Iterator[None]:
    """Translate the errors of an enqueue on a connection: a missing table or column means an
    unmigrated schema; a lost connection, an unavailable backend."""
    try:
        yield
    except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn) as exc:
        raise schema.not_migrated(exc) from exc
    except NOT_OUTAGES:
        raise
    except psycopg.OperationalError as exc:
        raise db.unavailable(exc) from exc


def enqueue_blocking(db: Connection, schema: Schema, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
    """Blocking twin of ``enqueue`` for sync callers: one transaction on a live connection of
    the sync pool (thread-safe; no event loop). A connection the server cut while it sat in
    the pool is replaced before anything is sent on it; one cut while the enqueue ran makes it
    run once more on a fresh connection (idempotent, as ``enqueue``)."""
    if not jobs:
        return []
    try:
        pool = db.sync_pool(schema.ready_blocking)
    except PoolTimeout as exc:
        raise db.unavailable(exc) from exc
    for attempt in (1, 2):
        try:
            with db.conn_blocking(pool) as conn:
                if not _any_unique(jobs):  # one statement: autocommit
                    return enqueue_on(db, schema, conn, jobs)
                with _on_callers_connection(db, schema), conn.transaction():
                    return enqueue_on(db, schema, conn, jobs)
        except BackendUnavailable as exc:
            if attempt == 2 or not dead_connection(exc):
                raise
    raise AssertionError("unreachable")  # pragma: no cover

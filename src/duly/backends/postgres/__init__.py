"""The PostgreSQL backend: one transaction per state change, SKIP LOCKED claims, LISTEN/NOTIFY.

Layout of the schema (``schema``, default ``duly``): ``jobs`` (one row per job, partial indexes
per hot path), ``stats`` (per-minute counters), ``workers``, ``queues``, ``gates`` (running count
per gate), ``rate_limits`` (GCRA state per key) and ``schema_version``; see ``migrations/``.
Every query lives in ``queries.sql``; ``{schema}`` in it is replaced by the quoted schema name
once, here, so the same text also runs on a caller's own connection for transactional enqueue
(:meth:`PostgresBackend.enqueue_on`).

Plain jobs (no unique key, no gate) take one statement per call, in autocommit. Enqueue there
is a plain insert (``enqueue_fresh``): a resent batch makes it fail and store nothing, and only
then does the insert that skips stored ids (``ON CONFLICT DO NOTHING``) run (see
``_enqueue_plan``). Concurrency control adds statements only for the batches that need them,
in one transaction:

- a batch with unique jobs: insert, then look up the holders of the keys that were taken (see
  ``_enqueue_plan``);
- a gated job leaving ``running`` (finish, recover, cancel): the state change, then
  ``gate_release`` (slot counts, gate rows locked in key order), then ``gate_unpark`` in a fresh
  snapshot that sees every job parked by a claim that held the gate row meanwhile. Claiming
  needs no transaction: one statement takes a slot or parks (``claim`` in ``queries.sql``);
- ``reserve_rate``: lock the keys' rows, compute the slots, store the new state.

Wake-ups: every change that may make a job claimable calls ``pg_notify('duly_<schema>', queue)``
inside its transaction; :meth:`PostgresBackend.wait_for_work` listens on one dedicated
connection (outside the pool) and returns as soon as one of its queues is named.

Modules: ``_queries`` (the query file, bound to a schema), ``_pool`` (connections, outages,
retries), ``_migrate`` (schema versions), ``_enqueue`` (the enqueue plan and its runners),
``_listen`` (LISTEN/NOTIFY). ``PostgresBackend`` is ``Connections`` < ``Migrations`` <
``Enqueuing`` plus the consuming, operator and introspection calls here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.types.json import Jsonb

from duly._errors import BackendUnavailable
from duly._limits import gcra_slots
from duly._records import (
    ID_CEILING,
    STATS_RETENTION,
    EnqueueResult,
    JobFilter,
    JobRecord,
    NewJob,
    Outcome,
    QueueStats,
    RateRequest,
    Recovered,
    StatRow,
    WorkerRecord,
)
from duly.backends.base import Backend
from duly.backends.postgres import _rows
from duly.backends.postgres._enqueue import Enqueuing
from duly.backends.postgres._events import PostgresEvents, purge_groups_events
from duly.backends.postgres._freshness import PostgresFreshness
from duly.backends.postgres._groups import PostgresGroups
from duly.backends.postgres._webhooks import PostgresWebhooks

__all__ = ["PostgresBackend"]


class PostgresBackend(Enqueuing):
    """duly's storage in one PostgreSQL schema (``schema``, created if missing).

    ``url`` is a libpq URL or DSN (``postgresql://user@host:5432/db``). ``open()`` applies the
    pending migrations unless ``auto_migrate`` is False (then run ``duly migrate`` first).
    ``max_connections`` bounds each pool. The constructor, ``open`` and ``close`` are those of
    ``Connections`` (``_pool.py``); enqueue is ``Enqueuing`` (``_enqueue.py``).
    """

    def __init__(
        self,
        url: str,
        schema: str = "duly",
        *,
        auto_migrate: bool = True,
        max_connections: int = 10,
    ) -> None:
        super().__init__(url, schema, auto_migrate=auto_migrate, max_connections=max_connections)
        # Capabilities (duly.backends.capability): one object each, over this pool.
        self.freshness = PostgresFreshness(self)
        self.groups = PostgresGroups(self)
        self.events = PostgresEvents(self)
        self.webhooks = PostgresWebhooks(self)
        self.transactional = PostgresTransactional(self)

    async def close(self) -> None:
        """Close the events LISTEN connection, the LISTEN connection and the pool."""
        await self.events.close()
        await super().close()

    def __repr__(self) -> str:
        return f"PostgresBackend({self._where!r}, schema={self.schema!r})"

    def clone(self) -> PostgresBackend:
        """A new, unopened backend on the same database, schema and settings."""
        return PostgresBackend(
            self.url,
            self.schema,
            auto_migrate=self.auto_migrate,
            max_connections=self._max_connections,
        )

    async def _free_gates(
        self,
        conn: psycopg.AsyncConnection[Any],
        released: Sequence[str],
        passed_on: Sequence[str] = (),
    ) -> None:
        """In the caller's transaction, once gated jobs left ``running`` (``released``: a gate
        per job) or a woken job was cancelled before it ran (``passed_on``): give the slots
        back, then wake one parked job per entry in a statement of its own (fresh snapshot)."""
        if released:
            await conn.execute(self._q["gate_release"], {"gates": list(released)})
        gates = [*released, *passed_on]
        await conn.execute(self._q["gate_unpark"], {"gates": gates, "channel": self.channel})

    # -- lifecycle ---------------------------------------------------------------------------
    async def ping(self) -> None:
        await self._one("ping", retry=True)

    async def write_raw_payload(self, job_id: str, payload: bytes) -> None:
        """Testing aid: overwrite a stored payload as is (no validation, no encoding)."""
        await self._one("write_raw_payload", {"id": job_id, "payload": bytes(payload)})

    # -- consuming ---------------------------------------------------------------------------
    async def claim(
        self, worker: str, queues: Sequence[str], limit: int, now: float, lease_until: float
    ) -> list[JobRecord]:
        if limit <= 0 or not queues:
            return []
        taken: list[JobRecord] = []
        try:
            async with self._conn() as conn:
                # Each statement is a claim of its own (autocommit). Another one follows only
                # when the last one met gated jobs and there is room left: each such round
                # takes a gated job or parks one, so this ends; plain jobs take one round.
                while len(taken) < limit:
                    params: dict[str, object] = {
                        "queues": list(queues),
                        "limit": limit - len(taken),
                        "first": not taken,
                        "now": float(now),
                        "worker": worker,
                        "lease_until": float(lease_until),
                    }
                    cur = await conn.execute(self._q["claim"], params)
                    rows = await cur.fetchall()
                    claimed, full, gated = _rows.CLAIM(cur).read(rows)
                    taken.extend(claimed)
                    if full:
                        await conn.execute(
                            self._q["gate_park"],
                            {"gates": list(full), "limits": list(full.values())},
                        )
                    if not gated:
                        break  # no gated job met: nothing left behind one
                    if any(record.lost for record in claimed):
                        break  # a job that lost a worker runs alone
        except BackendUnavailable:
            if not taken:
                raise
            # The jobs of the first rounds are committed as running under this worker: hand
            # them out (the next call meets the outage) rather than let their leases lapse.
        return taken

    async def heartbeat(
        self, worker: str, job_ids: Sequence[str], now: float, lease_until: float
    ) -> list[str]:
        params: dict[str, object] = {
            "worker": worker,
            "ids": list(job_ids),
            "now": float(now),
            "lease_until": float(lease_until),
        }
        row = await self._one("heartbeat", params, retry=True)
        assert row is not None
        alive = set(row[0])
        return [job_id for job_id in job_ids if job_id not in alive]

    async def finish(self, worker: str, outcomes: Sequence[Outcome], now: float) -> list[bool]:
        if not outcomes:
            return []

        def params(batch: Sequence[Outcome], with_gates: bool) -> dict[str, object]:
            return {
                "worker": worker,
                "now": float(now),
                "minute": int(now // 60),
                "channel": self.channel,
                "with_gates": with_gates,
                "ids": [o.job_id for o in batch],
                "kinds": [o.kind for o in batch],
                "results": [o.result for o in batch],
                "errors": [o.errors for o in batch],
                "run_at": [None if o.run_at is None else float(o.run_at) for o in batch],
                "expire_at": [None if o.expire_at is None else float(o.expire_at) for o in batch],
                # Empty when no outcome has one: unnest pads it with NULLs (see _enqueue_params).
                "rate_slots": [None if o.rate_slot is None else float(o.rate_slot) for o in batch]
                if any(o.rate_slot is not None for o in batch)
                else [],
            }

        # Plain jobs: one autocommit statement, which leaves gated jobs alone.
        row = await self._one("finish", params(outcomes, False))
        assert row is not None
        applied = set(row[0])
        rest = [o for o in outcomes if o.job_id not in applied]
        if rest:  # gated jobs (or outcomes to drop): the outcome and its freed slot together

            async def gated(conn: psycopg.AsyncConnection[Any]) -> list[str]:
                cur = await conn.execute(self._q["finish"], params(rest, True))
                row = await cur.fetchone()
                assert row is not None
                if row[1]:
                    await self._free_gates(conn, row[1])
                return list(row[0])

            applied.update(await self._transaction(gated))
        return [o.job_id in applied for o in outcomes]

    async def promote_due(self, now: float, limit: int) -> tuple[int, float | None]:
        params: dict[str, object] = {
            "now": float(now),
            "limit": max(int(limit), 0),
            "channel": self.channel,
        }
        row = await self._one("promote_due", params, retry=True)
        assert row is not None
        return int(row[0]), row[1]

    async def recover(
        self, now: float, max_lost: int, limit: int, failed_expire_at: float
    ) -> list[Recovered]:
        limit = max(int(limit), 0)
        params: dict[str, object] = {
            "now": float(now),
            "max_lost": int(max_lost),
            "limit": limit,
            "failed_expire_at": float(failed_expire_at),
            "minute": int(now // 60),
            "channel": self.channel,
            "with_gates": False,
        }
        # Plain jobs: one autocommit statement, which leaves gated jobs alone (see finish).
        row = await self._one("recover", params)
        assert row is not None
        rows = [row]
        left = limit - len(row[0]) - len(row[1]) - len(row[5])
        if row[3] and left > 0:

            async def gated(conn: psycopg.AsyncConnection[Any]) -> Any:
                cur = await conn.execute(
                    self._q["recover"], {**params, "limit": left, "with_gates": True}
                )
                row = await cur.fetchone()
                assert row is not None
                if row[2]:
                    await self._free_gates(conn, row[2])
                return row

            rows.append(await self._transaction(gated))
        # requeued, quarantined, cancelled (columns 0, 1, 5)
        kinds = ((0, True, False), (1, False, False), (5, False, True))
        return [Recovered(i, q, c) for r in rows for n, q, c in kinds for i in r[n]]

    async def wait_for_work(self, queues: Sequence[str], timeout: float) -> None:
        await self._listen.wait_for_work(queues, timeout)

    # -- workers -----------------------------------------------------------------------------
    async def register_worker(self, worker: str, now: float, info: dict[str, object]) -> None:
        params: dict[str, object] = {"worker": worker, "now": float(now), "info": Jsonb(info)}
        await self._one("register_worker", params, retry=True)

    async def unregister_worker(self, worker: str) -> None:
        await self._one("unregister_worker", {"worker": worker}, retry=True)

    async def workers(self) -> list[WorkerRecord]:
        return await self._all("workers", rows=_rows.WORKERS)

    # -- operator actions --------------------------------------------------------------------
    async def cancel(self, job_id: str, now: float, expire_at: float) -> bool:
        params: dict[str, object] = {
            "id": job_id,
            "now": float(now),
            "expire_at": float(expire_at),
        }

        async def run(conn: psycopg.AsyncConnection[Any]) -> bool:
            cur = await conn.execute(self._q["cancel"], params)
            row = await cur.fetchone()
            if row is None:
                return False
            gate, _was_running, was_waiting = row  # a running job keeps its slot for now
            if gate is not None and was_waiting:
                await self._free_gates(conn, [], [gate])
            await conn.execute(self._q["fresh_cancelled"], params)  # its scope, if a sync
            return True

        return await self._transaction(run)

    async def retry(self, job_id: str, now: float) -> bool:
        params: dict[str, object] = {"id": job_id, "now": float(now), "channel": self.channel}

        async def run(conn: psycopg.AsyncConnection[Any]) -> bool:
            await conn.execute(self._q["retry_take_over"], params)
            cur = await conn.execute(self._q["retry"], params)
            row = await cur.fetchone()
            assert row is not None
            return bool(row[0])

        try:
            return await self._transaction(run)
        except psycopg.errors.UniqueViolation:
            return False  # a holder of its key committed meanwhile: rolled back, unchanged

    async def reserve_rate(self, requests: Sequence[RateRequest], now: float) -> list[float]:
        if not requests:
            return []

        async def run(conn: psycopg.AsyncConnection[Any]) -> list[float]:
            keys = [r.key for r in requests]
            cur = await conn.execute(self._q["rate_lock"], {"keys": keys, "now": float(now)})
            state = {key: (tat, not_before) for key, tat, not_before in await cur.fetchall()}
            starts = gcra_slots(requests, float(now), state)
            params = {
                "keys": list(state),
                "tats": [tat for tat, _ in state.values()],
                "not_before": [not_before for _, not_before in state.values()],
            }
            await conn.execute(self._q["rate_store"], params)
            return starts

        return await self._transaction(run)

    async def purge(self, now: float, limit: int, keep: float = STATS_RETENTION) -> int:
        params: dict[str, object] = {
            "now": float(now),
            "limit": max(int(limit), 0),
            "oldest_minute": int((now - keep) // 60),
            "worker_cutoff": float(now - keep),
        }
        row = await self._one("purge", params, retry=True)
        assert row is not None
        async with self._conn() as conn:
            await purge_groups_events(self, conn, now, keep)
        return int(row[0])

    # -- introspection -----------------------------------------------------------------------
    async def get_job(self, job_id: str) -> JobRecord | None:
        found = await self._all("get_job", {"id": job_id}, rows=_rows.GET_JOB)
        return found[0] if found else None

    async def list_jobs(self, where: JobFilter, limit: int) -> list[JobRecord]:
        params: dict[str, object] = {
            "key": where.key,
            "status": where.status,
            "task": where.task,
            "queue": where.queue,
            "before": ID_CEILING if where.before is None else where.before,
            "limit": max(int(limit), 0),
        }
        if where.key is None:
            return await self._all("list_jobs", params, rows=_rows.LIST_JOBS)
        return await self._all("list_jobs_by_key", params, rows=_rows.LIST_JOBS_BY_KEY)

    async def queue_stats(self) -> list[QueueStats]:
        return await self._all("queue_stats", rows=_rows.QUEUE_STATS)

    async def stats(self, since: float) -> list[StatRow]:
        first_minute = math.ceil(since / 60)
        return await self._all("stats", {"first_minute": first_minute}, rows=_rows.STATS)


class PostgresTransactional:
    """``duly.backends.transactional.TransactionalEnqueue`` on PostgreSQL
    (``backend.transactional``): ``enqueue`` on the caller's connection (see ``_enqueue.py``)."""

    def __init__(self, backend: PostgresBackend) -> None:
        self._backend = backend

    def enqueue(self, conn: Any, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Insert ``jobs`` with the caller's connection, inside its current transaction."""
        return self._backend.enqueue_on(conn, jobs)

    async def enqueue_async(self, conn: Any, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """The async twin of ``enqueue``, for a ``psycopg.AsyncConnection``."""
        return await self._backend.enqueue_on_async(conn, jobs)


if TYPE_CHECKING:

    def _conforms(backend: PostgresBackend) -> Backend:
        return backend  # mypy proves PostgresBackend implements the protocol

"""PgQueuer on PostgreSQL (database ``bench``), asyncpg driver. Worker: ``pgq run
module:factory`` (one process, batch size 10 by default). Bulk: ``Queries.enqueue`` with lists.
I/O-bound jobs: ``asleep_incr`` / ``apg_incr`` (async entrypoints) on the default worker (no
concurrency cap: every queued job can be in flight) and tuned with ``--batch-size 25``."""

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.queries import Queries

from bench import harness
from bench.peers._base import (
    BENCH_PG,
    aincr,
    apg_incr,
    asleep_incr,
    astamp,
    dist_version,
    pg_truncate,
    sync_redis,
)


@asynccontextmanager
async def main() -> AsyncIterator[PgQueuer]:
    """The factory (pgqueuer 1.6 wants an async generator yielding the manager)."""
    conn = await asyncpg.connect(BENCH_PG)
    pgq = PgQueuer(AsyncpgDriver(conn))

    @pgq.entrypoint("noop")
    async def noop(job: object) -> None:
        await aincr()

    @pgq.entrypoint("sleep_incr")
    async def sleep_job(job: object) -> None:
        await asleep_incr()

    @pgq.entrypoint("pg_incr")
    async def pg_job(job: object) -> None:
        await apg_incr()

    @pgq.entrypoint("stamp")
    async def stamp(job: object) -> None:
        await astamp()

    try:
        yield pgq
    finally:
        await conn.close()


class Peer:
    name = "pgqueuer"
    store = "postgres"
    version = dist_version("pgqueuer")
    has_bulk = True
    drain_modes = ["default"]
    # PgQueuer's performance-tuning guide: "Increase batch_size when jobs are short-lived
    # (< 1 s) and you see many dequeue round-trips", its example ``pgq.run(batch_size=25)``;
    # the only concurrency caps it documents (max_concurrent_tasks, per-entrypoint
    # concurrency_limit) are unset by default, so there is nothing to raise.
    io_tuning = "--batch-size 25"

    def __init__(self) -> None:
        self.q = None

    async def reset(self) -> None:
        sync_redis().flushdb()
        if self.q is None:
            conn = await asyncpg.connect(BENCH_PG)
            self.q = Queries(AsyncpgDriver(conn))
            exists = await conn.fetchval("select to_regclass('pgqueuer')")
            if not exists:
                await self.q.install()
        pg_truncate(["pgqueuer", "pgqueuer_log", "pgqueuer_statistics"])

    async def enqueue_one(self) -> None:
        await self.q.enqueue("noop", None)

    async def enqueue_bulk(self, n: int) -> None:
        for i in range(0, n, harness.BULK_BATCH):
            k = min(harness.BULK_BATCH, n - i)
            await self.q.enqueue(["noop"] * k, [None] * k, [0] * k)

    async def enqueue_stamp(self) -> None:
        await self.q.enqueue("stamp", None)

    async def enqueue_io(self, kind: str, n: int) -> None:
        entrypoint = {"sleep": "sleep_incr", "pg": "pg_incr"}[kind]
        for i in range(0, n, harness.BULK_BATCH):
            k = min(harness.BULK_BATCH, n - i)
            await self.q.enqueue([entrypoint] * k, [None] * k, [0] * k)

    def worker_cmd(self, mode: str) -> list[str]:
        # ``pgq run bench.peers.pgqueuer_peer:main`` crashes before starting with pgqueuer 1.6.0
        # and the typer pip resolves today (its --log-level default stays a str:
        # "AttributeError: 'str' object has no attribute 'name'"), so this module does what
        # that command does (same logger set-up, same supervisor.run defaults).
        return [sys.executable, "-m", "bench.peers.pgqueuer_peer"]

    def io_slots(self, mode: str) -> int:
        # pgqueuer/core/qm.py QueueManager.run: max_concurrent_tasks None (the supervisor.run
        # and ``pgq run`` default) means no cap, and fetch_jobs keeps dequeuing batches until
        # the queue is empty, starting a task per job: all queued jobs can run at once.
        return harness.IO_N


if __name__ == "__main__":
    import argparse

    from pgqueuer.adapters.cli import supervisor
    from pgqueuer.adapters.cli.cli import asyncio_run
    from pgqueuer.core import logconfig

    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int)  # as ``pgq run --batch-size`` (default 10)
    args = parser.parse_args()
    options = {} if args.batch_size is None else {"batch_size": args.batch_size}
    logconfig.setup_fancy_logger(logconfig.LogLevel.INFO)
    asyncio_run(supervisor.run(main, **options))

"""PgQueuer on PostgreSQL (database ``bench``), asyncpg driver. Worker: ``pgq run
module:factory`` (one process, batch size 10 by default). Bulk: ``Queries.enqueue`` with lists."""

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.queries import Queries

from bench import harness
from bench.peers._base import BENCH_PG, aincr, astamp, dist_version, pg_truncate, sync_redis


@asynccontextmanager
async def main() -> AsyncIterator[PgQueuer]:
    """The factory (pgqueuer 1.6 wants an async generator yielding the manager)."""
    conn = await asyncpg.connect(BENCH_PG)
    pgq = PgQueuer(AsyncpgDriver(conn))

    @pgq.entrypoint("noop")
    async def noop(job: object) -> None:
        await aincr()

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

    def worker_cmd(self, mode: str) -> list[str]:
        # ``pgq run bench.peers.pgqueuer_peer:main`` crashes before starting with pgqueuer 1.6.0
        # and the typer pip resolves today (its --log-level default stays a str:
        # "AttributeError: 'str' object has no attribute 'name'"), so this module does what
        # that command does (same logger set-up, same supervisor.run defaults).
        return [sys.executable, "-m", "bench.peers.pgqueuer_peer"]


if __name__ == "__main__":
    from pgqueuer.adapters.cli import supervisor
    from pgqueuer.adapters.cli.cli import asyncio_run
    from pgqueuer.core import logconfig

    logconfig.setup_fancy_logger(logconfig.LogLevel.INFO)
    asyncio_run(supervisor.run(main))

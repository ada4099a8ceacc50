"""procrastinate on PostgreSQL (database ``bench``, schema ``public``), PsycopgConnector.
Worker: ``procrastinate --app=... worker`` (one process, concurrency 1 by default). Bulk:
``Task.batch_defer_async``. I/O-bound jobs: ``asleep_incr`` / ``apg_incr`` (async) on the
default worker (1 slot) and tuned with ``--concurrency=30`` (30 sub-workers)."""

import procrastinate

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

app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=BENCH_PG))


@app.task(name="noop")
async def noop() -> None:
    await aincr()


@app.task(name="sleep_incr")
async def sleep_task() -> None:
    await asleep_incr()


@app.task(name="pg_incr")
async def pg_task() -> None:
    await apg_incr()


@app.task(name="stamp")
async def stamp() -> None:
    await astamp()


class Peer:
    name = "procrastinate"
    store = "postgres"
    version = dist_version("procrastinate")
    has_bulk = True
    drain_modes = ["default"]
    # procrastinate's docs ("Execute multiple jobs at the same time"): while a job waits for
    # I/O, async sub-workers run others: ``procrastinate worker --concurrency=30``. Its own
    # pool stays psycopg_pool's default 4 connections whatever the concurrency.
    io_tuning = "--concurrency=30"

    def __init__(self) -> None:
        self._open = False

    async def reset(self) -> None:
        sync_redis().flushdb()
        if not self._open:
            await app.open_async()
            self._open = True
            import psycopg

            with psycopg.connect(BENCH_PG) as conn:
                exists = conn.execute("select to_regclass('procrastinate_jobs')").fetchone()[0]
            if not exists:
                await app.schema_manager.apply_schema_async()
        pg_truncate(
            [
                "procrastinate_jobs",
                "procrastinate_events",
                "procrastinate_periodic_defers",
                "procrastinate_workers",
            ]
        )

    async def enqueue_one(self) -> None:
        await noop.defer_async()

    async def enqueue_bulk(self, n: int) -> None:
        for i in range(0, n, harness.BULK_BATCH):
            k = min(harness.BULK_BATCH, n - i)
            await noop.batch_defer_async(*({} for _ in range(k)))

    async def enqueue_stamp(self) -> None:
        await stamp.defer_async()

    def worker_cmd(self, mode: str) -> list[str]:
        return [
            harness.bin_of("procrastinate"),
            "--app=bench.peers.procrastinate_peer.app",
            "worker",
        ]

    async def enqueue_io(self, kind: str, n: int) -> None:
        task = {"sleep": sleep_task, "pg": pg_task}[kind]
        for i in range(0, n, harness.BULK_BATCH):
            k = min(harness.BULK_BATCH, n - i)
            await task.batch_defer_async(*({} for _ in range(k)))

    def io_slots(self, mode: str) -> int:
        # procrastinate/worker.py: WORKER_CONCURRENCY = 1 ("maximum number of parallel jobs")
        return int(self.io_tuning.split("=")[1]) if mode == "tuned" else 1

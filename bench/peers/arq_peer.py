"""arq. Worker: ``arq module.WorkerSettings`` (one process, max_jobs=10 by default). No bulk.
I/O-bound jobs: ``asleep_incr`` / ``apg_incr`` (async) on the default worker (10 slots) and
tuned with ``max_jobs=100`` (``TunedWorkerSettings``, 100 slots)."""

from arq import create_pool
from arq.connections import RedisSettings

from bench import harness
from bench.peers._base import (
    BENCH_REDIS,
    RedisPeer,
    aincr,
    apg_incr,
    asleep_incr,
    astamp,
    dist_version,
)

SETTINGS = RedisSettings.from_dsn(BENCH_REDIS)


async def noop(ctx: dict) -> None:
    await aincr()


async def sleep_job(ctx: dict) -> None:
    await asleep_incr()


async def pg_job(ctx: dict) -> None:
    await apg_incr()


async def stamp(ctx: dict) -> None:
    await astamp()


class WorkerSettings:
    functions = [noop, sleep_job, pg_job, stamp]
    redis_settings = SETTINGS


class TunedWorkerSettings:
    """arq's concurrency knob, ``max_jobs`` ("maximum number of jobs to run at a time"). Not a
    subclass: arq reads the settings class's own ``__dict__`` (arq/worker.py get_kwargs)."""

    functions = WorkerSettings.functions
    redis_settings = SETTINGS
    max_jobs = 100


class Peer(RedisPeer):
    name = "arq"
    version = dist_version("arq")
    io_tuning = "max_jobs=100"

    def __init__(self) -> None:
        self.pool = None

    async def after_reset(self) -> None:
        if self.pool is None:
            self.pool = await create_pool(SETTINGS)

    async def enqueue_one(self) -> None:
        await self.pool.enqueue_job("noop")

    async def enqueue_stamp(self) -> None:
        await self.pool.enqueue_job("stamp")

    def worker_cmd(self, mode: str) -> list[str]:
        return [harness.bin_of("arq"), "bench.peers.arq_peer.WorkerSettings"]

    async def enqueue_io(self, kind: str, n: int) -> None:
        function = {"sleep": "sleep_job", "pg": "pg_job"}[kind]
        for _ in range(n):
            await self.pool.enqueue_job(function)

    def io_worker_cmd(self, mode: str) -> list[str]:
        if mode == "tuned":
            return [harness.bin_of("arq"), "bench.peers.arq_peer.TunedWorkerSettings"]
        return self.worker_cmd("default")

    def io_slots(self, mode: str) -> int:
        # arq/worker.py Worker.__init__: max_jobs: int = 10 (one process, no --workers option)
        return TunedWorkerSettings.max_jobs if mode == "tuned" else 10

"""arq. Worker: ``arq module.WorkerSettings`` (one process, max_jobs=10 by default). No bulk."""

from arq import create_pool
from arq.connections import RedisSettings

from bench import harness
from bench.peers._base import BENCH_REDIS, RedisPeer, aincr, astamp, dist_version

SETTINGS = RedisSettings.from_dsn(BENCH_REDIS)


async def noop(ctx: dict) -> None:
    await aincr()


async def stamp(ctx: dict) -> None:
    await astamp()


class WorkerSettings:
    functions = [noop, stamp]
    redis_settings = SETTINGS


class Peer(RedisPeer):
    name = "arq"
    version = dist_version("arq")

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

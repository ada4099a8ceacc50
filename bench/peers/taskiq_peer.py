"""taskiq with taskiq-redis' ``RedisStreamBroker`` (acknowledged streams), no result backend.
Default worker: ``taskiq worker module:broker`` (2 processes); one process: ``--workers 1``."""

from taskiq_redis import RedisStreamBroker

from bench import harness
from bench.peers._base import BENCH_REDIS, RedisPeer, aincr, astamp, dist_version

broker = RedisStreamBroker(url=BENCH_REDIS)


@broker.task(task_name="noop")
async def noop() -> None:
    await aincr()


@broker.task(task_name="stamp")
async def stamp() -> None:
    await astamp()


class Peer(RedisPeer):
    name = "taskiq"
    version = dist_version("taskiq") + " / taskiq-redis " + dist_version("taskiq-redis")
    drain_modes = ["default", "one"]

    async def after_reset(self) -> None:
        await broker.startup()  # declares the stream's consumer group (at "$") before enqueues

    async def enqueue_one(self) -> None:
        await noop.kiq()

    async def enqueue_stamp(self) -> None:
        await stamp.kiq()

    def worker_cmd(self, mode: str) -> list[str]:
        argv = [harness.bin_of("taskiq"), "worker", "bench.peers.taskiq_peer:broker"]
        return argv + (["--workers", "1"] if mode == "one" else [])

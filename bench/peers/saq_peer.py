"""SAQ. Worker: ``saq module.settings`` (one process, concurrency 10 by default). No bulk
enqueue API (``Queue.map`` waits for the results)."""

from saq import Queue

from bench import harness
from bench.peers._base import BENCH_REDIS, RedisPeer, aincr, astamp, dist_version

queue = Queue.from_url(BENCH_REDIS)


async def noop(ctx: dict) -> None:
    await aincr()


async def stamp(ctx: dict) -> None:
    await astamp()


settings = {"queue": queue, "functions": [noop, stamp]}


class Peer(RedisPeer):
    name = "saq"
    version = dist_version("saq")

    async def enqueue_one(self) -> None:
        await queue.enqueue("noop")

    async def enqueue_stamp(self) -> None:
        await queue.enqueue("stamp")

    def worker_cmd(self, mode: str) -> list[str]:
        return [harness.bin_of("saq"), "bench.peers.saq_peer.settings"]

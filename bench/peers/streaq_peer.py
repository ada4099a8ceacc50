"""streaq. Worker: ``streaq run module:worker`` (one process, concurrency 16 by default).
Bulk: ``Worker.enqueue_many`` (one pipeline per batch)."""

from streaq import Worker

from bench import harness
from bench.peers._base import BENCH_REDIS, RedisPeer, aincr, astamp, dist_version

worker = Worker(redis_url=BENCH_REDIS)


@worker.task()
async def noop() -> None:
    await aincr()


@worker.task()
async def stamp() -> None:
    await astamp()


class Peer(RedisPeer):
    name = "streaq"
    version = dist_version("streaq")
    has_bulk = True

    def __init__(self) -> None:
        self._open = False

    async def after_reset(self) -> None:
        if not self._open:
            await worker.__aenter__()
            self._open = True

    async def enqueue_one(self) -> None:
        await noop.enqueue()

    async def enqueue_bulk(self, n: int) -> None:
        for i in range(0, n, harness.BULK_BATCH):
            k = min(harness.BULK_BATCH, n - i)
            await worker.enqueue_many([noop.enqueue() for _ in range(k)])

    async def enqueue_stamp(self) -> None:
        await stamp.enqueue()

    def worker_cmd(self, mode: str) -> list[str]:
        return [harness.bin_of("streaq"), "run", "bench.peers.streaq_peer:worker"]

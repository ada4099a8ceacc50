"""streaq. Worker: ``streaq run module:worker`` (one process, concurrency 16 by default).
Bulk: ``Worker.enqueue_many`` (one pipeline per batch). I/O-bound jobs: ``asleep_incr`` /
``apg_incr`` (async) on the default worker (16 slots) and tuned with ``concurrency=100``
(``tuned_worker``, 100 slots)."""

from streaq import Worker

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

worker = Worker(redis_url=BENCH_REDIS)


@worker.task()
async def noop() -> None:
    await aincr()


@worker.task()
async def sleep_job() -> None:
    await asleep_incr()


@worker.task()
async def pg_job() -> None:
    await apg_incr()


@worker.task()
async def stamp() -> None:
    await astamp()


# streaq's concurrency knob is the Worker argument ``concurrency`` ("number of tasks the worker
# can run simultaneously"; ``streaq run`` has no flag for it), so the tuned run points at a
# second Worker on the same queue with the same tasks. Its docs give no I/O-bound value: 100.
# (Registered anew rather than with ``Worker.include``, which would re-point ``worker``'s tasks,
# and so the enqueues, at this worker.)
tuned_worker = Worker(redis_url=BENCH_REDIS, concurrency=100)
for _task in worker.registry.values():
    tuned_worker.task(name=_task.fn_name)(_task.fn)


class Peer(RedisPeer):
    name = "streaq"
    version = dist_version("streaq")
    has_bulk = True
    io_tuning = "concurrency=100"

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

    async def enqueue_io(self, kind: str, n: int) -> None:
        task = {"sleep": sleep_job, "pg": pg_job}[kind]
        for i in range(0, n, harness.BULK_BATCH):
            k = min(harness.BULK_BATCH, n - i)
            await worker.enqueue_many([task.enqueue() for _ in range(k)])

    def io_worker_cmd(self, mode: str) -> list[str]:
        if mode == "tuned":
            return [harness.bin_of("streaq"), "run", "bench.peers.streaq_peer:tuned_worker"]
        return self.worker_cmd("default")

    def io_slots(self, mode: str) -> int:
        # streaq/worker.py Worker.__init__: concurrency: int = 16; streaq/cli.py --workers 1
        return tuned_worker.concurrency if mode == "tuned" else 16

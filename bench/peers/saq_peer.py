"""SAQ. Worker: ``saq module.settings`` (one process, concurrency 10 by default). No bulk
enqueue API (``Queue.map`` waits for the results). I/O-bound jobs: ``asleep_incr`` /
``apg_incr`` (async) on the default worker (10 slots) and tuned with ``concurrency=100``
(``tuned_settings``, 100 slots)."""

from saq import Queue

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

queue = Queue.from_url(BENCH_REDIS)


async def noop(ctx: dict) -> None:
    await aincr()


async def sleep_job(ctx: dict) -> None:
    await asleep_incr()


async def pg_job(ctx: dict) -> None:
    await apg_incr()


async def stamp(ctx: dict) -> None:
    await astamp()


settings = {"queue": queue, "functions": [noop, sleep_job, pg_job, stamp]}
# SAQ's concurrency knob is the worker setting "concurrency" ("number of jobs to process
# concurrently"; the CLI has no flag for it). Its docs give no I/O-bound value: a round 100.
tuned_settings = {**settings, "concurrency": 100}


class Peer(RedisPeer):
    name = "saq"
    version = dist_version("saq")
    io_tuning = "concurrency=100"

    async def enqueue_one(self) -> None:
        await queue.enqueue("noop")

    async def enqueue_stamp(self) -> None:
        await queue.enqueue("stamp")

    def worker_cmd(self, mode: str) -> list[str]:
        return [harness.bin_of("saq"), "bench.peers.saq_peer.settings"]

    async def enqueue_io(self, kind: str, n: int) -> None:
        function = {"sleep": "sleep_job", "pg": "pg_job"}[kind]
        for _ in range(n):
            await queue.enqueue(function)

    def io_worker_cmd(self, mode: str) -> list[str]:
        if mode == "tuned":
            return [harness.bin_of("saq"), "bench.peers.saq_peer.tuned_settings"]
        return self.worker_cmd("default")

    def io_slots(self, mode: str) -> int:
        # saq/worker.py Worker.__init__: concurrency: int = 10; saq/__main__.py --workers 1
        return tuned_settings["concurrency"] if mode == "tuned" else 10

"""taskiq with taskiq-redis' ``RedisStreamBroker`` (acknowledged streams), no result backend.
Default worker: ``taskiq worker module:broker`` (2 processes); one process: ``--workers 1``.
I/O-bound jobs: ``asleep_incr`` / ``apg_incr`` (async) on the default worker (2 processes of 100
async tasks: 200 slots) and tuned with ``--max-async-tasks 1000`` (2000 slots)."""

from taskiq_redis import RedisStreamBroker

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

broker = RedisStreamBroker(url=BENCH_REDIS)


@broker.task(task_name="noop")
async def noop() -> None:
    await aincr()


@broker.task(task_name="sleep_incr")
async def sleep_task() -> None:
    await asleep_incr()


@broker.task(task_name="pg_incr")
async def pg_task() -> None:
    await apg_incr()


@broker.task(task_name="stamp")
async def stamp() -> None:
    await astamp()


class Peer(RedisPeer):
    name = "taskiq"
    version = dist_version("taskiq") + " / taskiq-redis " + dist_version("taskiq-redis")
    drain_modes = ["default", "one"]
    # taskiq's CLI docs name --max-async-tasks ("maximum number of simultaneously running async
    # tasks") as the per-process concurrency knob; its default is already 100, so the tuned
    # run takes it ten times higher (the docs give no value).
    io_tuning = "--max-async-tasks 1000"

    async def after_reset(self) -> None:
        await broker.startup()  # declares the stream's consumer group (at "$") before enqueues

    async def enqueue_one(self) -> None:
        await noop.kiq()

    async def enqueue_stamp(self) -> None:
        await stamp.kiq()

    def worker_cmd(self, mode: str) -> list[str]:
        argv = [harness.bin_of("taskiq"), "worker", "bench.peers.taskiq_peer:broker"]
        return argv + (["--workers", "1"] if mode == "one" else [])

    async def enqueue_io(self, kind: str, n: int) -> None:
        task = {"sleep": sleep_task, "pg": pg_task}[kind]
        for _ in range(n):
            await task.kiq()

    def io_slots(self, mode: str) -> int:
        # taskiq/cli/worker/args.py: --workers 2, --max-async-tasks 100 (per worker process)
        per_process = int(self.io_tuning.split()[1]) if mode == "tuned" else 100
        return 2 * per_process

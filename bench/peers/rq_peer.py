"""RQ. Default worker: ``rq worker`` (``Worker``, forks a work horse per job); one process:
``--worker-class rq.worker.SimpleWorker`` (runs jobs in the worker process). Bulk:
``Queue.enqueue_many`` (one pipeline per batch). I/O-bound jobs: ``sleep_incr`` / ``pg_incr``
(sync) on the default worker (1 slot: one job at a time) and tuned with ``rq worker-pool -n 3``
(3 workers, 3 slots)."""

from redis import Redis
from rq import Queue

from bench import harness
from bench.peers._base import (
    BENCH_REDIS,
    RedisPeer,
    dist_version,
    incr,
    pg_incr,
    sleep_incr,
    stamp,
)


def noop() -> None:
    incr()


def sleep_job() -> None:
    sleep_incr()


def pg_job() -> None:
    pg_incr()


def stamp_job() -> None:
    stamp()


class Peer(RedisPeer):
    name = "rq"
    version = dist_version("rq")
    has_bulk = True
    drain_modes = ["default", "one"]
    mode_labels = {"default": "Worker", "one": "SimpleWorker"}
    # RQ's docs: "Each worker will process a single job at a time ... If you want to perform
    # jobs concurrently, simply start more workers"; ``rq worker-pool`` does that in one command
    # (docs example: ``rq worker-pool high default low -n 3``). RQ has no I/O-specific setting.
    io_tuning = "worker-pool -n 3"

    def __init__(self) -> None:
        self.queue = Queue(connection=Redis.from_url(BENCH_REDIS))

    def enqueue_one(self) -> None:
        self.queue.enqueue(noop)

    def enqueue_bulk(self, n: int) -> None:
        for i in range(0, n, harness.BULK_BATCH):
            k = min(harness.BULK_BATCH, n - i)
            self.queue.enqueue_many([Queue.prepare_data(noop) for _ in range(k)])

    def enqueue_stamp(self) -> None:
        self.queue.enqueue(stamp_job)

    def worker_cmd(self, mode: str) -> list[str]:
        argv = [harness.bin_of("rq"), "worker", "--url", BENCH_REDIS]
        if mode == "one":
            argv += ["--worker-class", "rq.worker.SimpleWorker"]
        return argv

    def enqueue_io(self, kind: str, n: int) -> None:
        job = {"sleep": sleep_job, "pg": pg_job}[kind]
        for i in range(0, n, harness.BULK_BATCH):
            k = min(harness.BULK_BATCH, n - i)
            self.queue.enqueue_many([Queue.prepare_data(job) for _ in range(k)])

    def io_worker_cmd(self, mode: str) -> list[str]:
        if mode == "tuned":  # the pool is a sibling command of ``rq worker``, same options
            return [harness.bin_of("rq"), "worker-pool", "--url", BENCH_REDIS, "-n", "3"]
        return self.worker_cmd("default")

    def io_slots(self, mode: str) -> int:
        # rq/worker/worker_classes.py Worker: one work horse at a time per worker; the pool
        # runs -n of them (rq/cli/workers.py worker_pool --num-workers, default 1)
        return 3 if mode == "tuned" else 1

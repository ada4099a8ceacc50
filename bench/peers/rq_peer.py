"""RQ. Default worker: ``rq worker`` (``Worker``, forks a work horse per job); one process:
``--worker-class rq.worker.SimpleWorker`` (runs jobs in the worker process). Bulk:
``Queue.enqueue_many`` (one pipeline per batch)."""

from redis import Redis
from rq import Queue

from bench import harness
from bench.peers._base import BENCH_REDIS, RedisPeer, dist_version, incr, stamp


def noop() -> None:
    incr()


def stamp_job() -> None:
    stamp()


class Peer(RedisPeer):
    name = "rq"
    version = dist_version("rq")
    has_bulk = True
    drain_modes = ["default", "one"]
    mode_labels = {"default": "Worker", "one": "SimpleWorker"}

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

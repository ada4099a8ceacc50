"""Huey with ``RedisHuey`` (blocking dequeue). Consumer: ``huey_consumer module.huey`` (one
process, 1 worker thread by default). No bulk enqueue API. I/O-bound jobs: ``sleep_incr`` /
``pg_incr`` (sync) on the default consumer (1 slot) and tuned with ``-w 32`` (32 worker
threads)."""

from huey import RedisHuey

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

huey = RedisHuey("bench", url=BENCH_REDIS)


@huey.task()
def noop() -> None:
    incr()


@huey.task()
def sleep_task() -> None:
    sleep_incr()


@huey.task()
def pg_task() -> None:
    pg_incr()


@huey.task()
def stamp_task() -> None:
    stamp()


class Peer(RedisPeer):
    name = "huey"
    version = dist_version("huey")
    # Huey's docs: "If your work-loads are mostly IO-bound, you can run the consumer with
    # threads or greenlets instead ... huey_consumer my_app.huey -k greenlet -w 32". Greenlets
    # need gevent (not installed); threads are the default worker type, so the setting is -w.
    io_tuning = "-w 32"

    def enqueue_one(self) -> None:
        noop()

    def enqueue_stamp(self) -> None:
        stamp_task()

    def worker_cmd(self, mode: str) -> list[str]:
        return [harness.bin_of("huey_consumer"), "bench.peers.huey_peer.huey"]

    def enqueue_io(self, kind: str, n: int) -> None:
        task = {"sleep": sleep_task, "pg": pg_task}[kind]
        for _ in range(n):
            task()

    def io_slots(self, mode: str) -> int:
        # huey/consumer_options.py config_defaults: workers=1, worker_type=thread (one process)
        return int(self.io_tuning.split()[1]) if mode == "tuned" else 1
